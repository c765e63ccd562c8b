"""Errors the shape environment raises, written for the person whose model it is."""
from __future__ import annotations

__all__ = ["ShapeError", "DataDependentError", "CheckFailed", "InputOutOfRange"]


class ShapeError(RuntimeError):
    """Base class of shapeproof's shape errors."""


class DataDependentError(ShapeError):
    """A branch on a size that depends on data (an unbacked symbol) could not be decided.

    ``expression`` is the condition in the user's terms, ``symbols`` maps each
    unbacked symbol to where it came from, ``suggestions`` holds
    ``torch._check(...)`` calls that would let tracing continue.
    """

    def __init__(self, message: str, expression: str = "", symbols: dict[str, str] | None = None,
                 suggestions: list[str] | None = None, where=None):
        # the defaults let torch's GuardOnDataDependentSymNode, which calls super().__init__(message),
        # sit before this class in the MRO of the tracer's combined error type
        super().__init__(message)
        self.expression = expression
        self.symbols = symbols or {}
        self.suggestions = suggestions or []
        self.where = where


class CheckFailed(ShapeError):
    """``torch._check(cond)`` on a condition that is false (for the example, or everywhere)."""


class InputOutOfRange(ShapeError):
    """An example input's size lies outside the range declared for it."""
