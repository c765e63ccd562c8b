"""The answer to a query: proven, refuted with a counterexample, or unknown."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

__all__ = ["Vocabulary", "Status", "Verdict"]


class Vocabulary(str, Enum):
    """A small vocabulary of names that prints as its value (``str(Status.PROVEN) == "proven"``)."""

    def __str__(self) -> str:
        return self.value


class Status(Vocabulary):
    PROVEN = "proven"
    REFUTED = "refuted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    """What a strategy decided about a goal under facts and ranges.

    ``counterexample`` is set exactly when ``status`` is ``REFUTED``: a value
    for every symbol of the query, inside its range, where every fact holds
    and the goal does not (it is false, or divides by zero).
    """

    status: Status
    strategy: str
    seconds: float
    reason: str
    counterexample: dict[str, int] | None = field(default=None)

    @property
    def proven(self) -> bool:
        return self.status is Status.PROVEN

    @property
    def refuted(self) -> bool:
        return self.status is Status.REFUTED

    @property
    def decided(self) -> bool:
        return self.status is not Status.UNKNOWN

    @property
    def milliseconds(self) -> float:
        return self.seconds * 1000.0

    def __str__(self) -> str:
        text = f"{self.status.value} by {self.strategy} in {self.milliseconds:.1f} ms: {self.reason}"
        if self.counterexample is not None:
            point = ", ".join(f"{k}={v}" for k, v in self.counterexample.items())
            text += f" (counterexample: {point})"
        return text
