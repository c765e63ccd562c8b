"""Checks of the names, ranges and budgets a user hands the engine, shared by the CLI and the service.

The solver accepts any ``(lo, hi)`` and any timeout: an empty range makes every
goal vacuously *proven*, and a NaN timeout never expires.  Front ends call
these first so that such input is refused with one clear message instead.
"""
from __future__ import annotations

import math
import re

__all__ = ["InputError", "check_name", "check_seconds", "check_span", "parse_int"]

_INT = re.compile(r"[+-]?[0-9]+")          # ASCII digits only: int() also reads '٣' and '４'


class InputError(ValueError):
    """A name, range or budget the engine must not be asked about."""


def check_name(name) -> str:
    """A symbol name: an ASCII Python identifier (what torch and the guard parser use)."""
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        raise InputError(f"bad symbol name {str(name)[:40]!r}: use letters, digits and _ (ASCII)")
    return name


def check_span(name: str, lo, hi) -> tuple:
    """``(lo, hi)`` with ``None`` for unbounded; an empty range would prove every goal vacuously."""
    for end in (lo, hi):
        if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
            raise InputError(f"range of {name}: bounds must be integers or unbounded, got {end!r}")
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"range of {name} is empty ({lo} > {hi}): every goal would hold vacuously")
    return (lo, hi)


MAX_DIGITS = 60          # the safe parser's longest integer literal


def parse_int(text: str) -> int:
    """An integer written with ASCII digits (``int`` alone accepts any Unicode digit)."""
    text = text.strip()
    if not _INT.fullmatch(text):
        raise InputError(f"{text[:40]!r} is not an integer (ASCII digits)")
    if len(text.lstrip("+-")) > MAX_DIGITS:       # int() itself refuses past 4300 digits, with a ValueError
        raise InputError(f"{text[:40]!r}... has more than {MAX_DIGITS} digits: no size is that large")
    return int(text)


def check_seconds(value, what: str = "timeout") -> float:
    """A finite, positive number of seconds (``NaN`` compares false to everything and never expires)."""
    try:
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        seconds = float(value) if is_number else math.nan
    except OverflowError:                  # an int past float's range
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"{what} must be a finite positive number of seconds, got {str(value)[:40]}")
    return seconds
