"""Explain a guard given as text, without a trace (what users paste from a torch error).

>>> ex = explain_guard("(T % 4) != 0", {"T": (2, 1024)})
>>> ex.status, ex.counterexample
('refuted', {'T': 4})
"""
from __future__ import annotations

from shapeproof import solver as S
from shapeproof.solver import parse_condition, prove

from .env import ShapeEnv
from .explain import Explanation
from .provenance import Provenance
from .symbols import Source

__all__ = ["explain_guard"]


def explain_guard(text, ranges: dict, where: Provenance | None = None, sources: dict | None = None,
                  strategy="cascade", timeout: float = 2.0) -> Explanation:
    """Prove or refute ``text`` over ``ranges`` and explain it like a guard from a trace.

    ``sources`` optionally names each symbol's input dim (``{"T": "x.size(1)"}``).
    The example value of each symbol (used to search fixes around it) is a point
    of the ranges where the guard holds, if there is one.
    """
    cond = parse_condition(text)
    names = sorted(s.name for s in cond.free_symbols)
    witness = prove(S.neg(cond), ranges=ranges, strategy=strategy, timeout=timeout)
    point = witness.counterexample or {}
    env = ShapeEnv(strategy=strategy, timeout=timeout, specialize_zero_one=False)
    mapping = {}
    for name in names:
        lo, hi = ranges.get(name, (None, None))
        hint = point.get(name, lo if lo is not None else (hi if hi is not None else 0))
        source = Source((sources or {}).get(name, name))
        mapping[name] = env.create_backed_symbol(hint, source, declared=(lo, hi), name=f"_{name}",
                                                 dim_name=name, is_size=False)
    renamed = S.substitute(cond, {s: mapping[s.name] for s in cond.free_symbols})
    guard = env.record_guard(renamed, where=where or Provenance())
    if guard is None:   # constant after substitution: nothing to explain beyond its value
        raise S.ParseError(f"{text} does not depend on any symbol: there is nothing to explain", str(text))
    report = env.produce_guards(strategy=strategy, timeout=timeout)
    target = next((v for v in report.violations if v.guard is guard), guard)
    return env.explain(target)
