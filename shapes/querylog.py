"""The query log of an export: every question the engine put to the solver, replayable under any strategy.

Each line of the log (JSONL) holds the goal and facts as guard text (read
back with the safe parser), the ranges, and the strategy, verdict and time
of the original answer.  ``replay`` asks the same questions again under
another strategy without re-tracing the model, which is how one export is
compared across strategies.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from shapeproof.solver import DEFAULT_TIMEOUT, ParseError, Verdict, formula_str, parse_condition, prove

from .inputs import check_name, check_span
from .records import Query

__all__ = ["LoggedQuery", "read_log", "replay", "summarize", "to_log", "write_log"]


@dataclass(frozen=True)
class LoggedQuery:
    goal: str
    facts: tuple[str, ...]
    ranges: dict            # symbol name -> [lo, hi], None for unbounded
    strategy: str
    status: str
    seconds: float
    purpose: str = ""
    where: str = ""

    @property
    def key(self) -> tuple:
        return (self.goal, tuple(sorted(self.facts)),
                tuple(sorted((k, tuple(v)) for k, v in self.ranges.items())))


def to_log(queries: Iterable[Query]) -> list[LoggedQuery]:
    out = []
    for q in queries:
        frame = q.where.frame if q.where is not None else None
        where = frame.short if frame is not None else ((q.where.op or "") if q.where is not None else "")
        out.append(LoggedQuery(formula_str(q.goal), tuple(formula_str(f) for f in q.facts),
                               {k: list(v) for k, v in q.ranges.items()}, q.strategy, q.status, q.seconds,
                               q.purpose, where))
    return out


def write_log(queries: Iterable[Query | LoggedQuery], path) -> Path:
    path = Path(path)
    entries = [q if isinstance(q, LoggedQuery) else to_log([q])[0] for q in queries]
    with open(path, "w") as f:
        f.writelines(json.dumps(e.__dict__) + "\n" for e in entries)
    return path


def read_log(path) -> list[LoggedQuery]:
    """The questions of a log written by ``write_log``; a line that is not one raises ``ParseError``."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(_logged(json.loads(line)))
                except (ValueError, KeyError, TypeError, RecursionError) as exc:   # InputError is one
                    raise ParseError(f"{path}:{number}: not a logged question ({type(exc).__name__}: "
                                     f"{str(exc)[:100]})") from None
    return out


def _logged(d) -> LoggedQuery:
    if not isinstance(d, dict) or not isinstance(d["goal"], str) or not isinstance(d["facts"], list) \
            or not all(isinstance(f, str) for f in d["facts"]) or not isinstance(d["ranges"], dict):
        raise TypeError("goal and facts must be text, ranges an object")
    ranges = {}
    for name, span in d["ranges"].items():
        if not isinstance(span, list) or len(span) != 2:
            raise TypeError(f"the range of {str(name)[:40]} is not [lo, hi]")
        ranges[check_name(name)] = list(check_span(name, *span))
    seconds = d["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("seconds is not a number")
    return LoggedQuery(d["goal"], tuple(d["facts"]), ranges, str(d["strategy"]), str(d["status"]), seconds,
                       str(d.get("purpose", "")), str(d.get("where", "")))


def replay(log: Iterable[LoggedQuery], strategy="cascade", timeout: float = DEFAULT_TIMEOUT) -> list[Verdict]:
    """The verdict of every logged question under ``strategy``, in log order."""
    verdicts = []
    for q in log:
        ranges = {k: tuple(v) for k, v in q.ranges.items()}
        verdicts.append(prove(parse_condition(q.goal), ranges=ranges,
                              facts=[parse_condition(f) for f in q.facts], strategy=strategy,
                              timeout=timeout))
    return verdicts


def summarize(statuses: Iterable[str], seconds: Iterable[float]) -> dict:
    """Counts by verdict and solver time (ms): the columns of the strategy tables."""
    statuses, ms = list(statuses), sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))] if ms else 0.0
    return {"total": len(statuses), "proven": statuses.count("proven"), "refuted": statuses.count("refuted"),
            "unknown": statuses.count("unknown"), "ms_median": statistics.median(ms) if ms else 0.0,
            "ms_p95": p95}
