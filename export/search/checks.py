"""A region's predicate as a program's input checks: Python over torch's input sources, and what share of the
declared sizes it accepts."""
from __future__ import annotations

import sys

import sympy
from sympy import Expr, Symbol

from shapeproof import solver as F      # the solver's facade: conditions, questions, guard code
from shapeproof.solver import guard_code, holding_grid
from shapeproof.tracer.torch_internals import EXPORTED_PROGRAM_GUARDS_ATTRIBUTE

__all__ = ["set_checks", "derived_dim_checks", "variable_sources", "accepted_sizes", "python_guard",
           "COUNTED"]


def set_checks(program, checks: list[str]) -> None:
    """The Python conditions ``program.module()`` asserts on its inputs (torch's ``_guards_code``), once
    each."""
    setattr(program, EXPORTED_PROGRAM_GUARDS_ATTRIBUTE, list(dict.fromkeys(checks)))


def derived_dim_checks(sizes: dict[str, Expr]) -> list[str]:
    """``size % a == 0`` for every input dim declared as ``a*Dim + b`` with ``|a| > 1``.

    torch's program checks such a dim's range but not that it is a multiple:
    torch.export gets that check only from guards its own reasoning happened to
    record, and the engine decides those statically.  Without it a 65-row image
    would run through a program traced for multiples of 32.  When the root dim
    is an input too, torch checks the equality itself.
    """
    read_directly = {term for name, term in sizes.items() if name.startswith("L[") and term.is_Symbol}
    return [f"({name} - {b}) % {abs(a)} == 0" if b else f"{name} % {abs(a)} == 0"
            for name, (var, a, b) in _linear_sizes(sizes)
            if abs(a) > 1 and var not in read_directly]      # torch checks an equality with a read root


def _linear_sizes(sizes: dict[str, Expr]) -> list[tuple[str, tuple[Symbol, int, int]]]:
    """``(name, (var, a, b))`` for each input dim whose size is ``a*var + b``, by name."""
    out = []
    for name, term in sorted(sizes.items()):
        if len(term.free_symbols) != 1:
            continue
        (var,) = term.free_symbols
        poly = sympy.Poly(term, var)
        if poly.degree() == 1:
            a, b = (int(c) for c in poly.all_coeffs())
            out.append((name, (var, a, b)))
    return out


def variable_sources(sizes: dict[str, Expr]) -> dict[Symbol, str]:
    """Each canonical variable as Python over torch's source names (``(L['x'].size()[1] - 1) // 2``)."""
    out: dict[Symbol, str] = {}
    for name, (var, a, b) in _linear_sizes(sizes):
        if var in out:
            continue
        text = name if b == 0 else f"({name} - {b})"
        out[var] = text if a == 1 else f"({text} // {a})"
    return out


def accepted_sizes(predicate: F.Formula, box: dict, limit: int = 4096) -> str | None:
    """What ``predicate`` accepts of ``box``, for messages: counted where the box has at most ``COUNTED``
    points (``3 of 64 (h, w): h in 2..3, w in 2..3``; past ``limit`` points with the share, ``504 of 32744
    (B, N), 2%``), else on an even grid of about ``limit`` of them (``about 87% of (h, w), on an even grid
    of 4096``: a periodic check, such as a square token count, can fool it); an unbounded dim is read from
    its lower end over ``UNBOUNDED_WINDOW`` sizes (the message says so).  None where the predicate reads no
    size."""
    if not predicate.free_symbols:
        return None
    spans, open_ended = {}, []
    for s in predicate.free_symbols:
        lo, hi = box.get(s, (None, None))
        lo = 0 if lo is None else lo
        if hi is None or hi >= sys.maxsize:            # ``RegionSearch.box`` cuts an open end there
            hi = lo + UNBOUNDED_WINDOW - 1
            open_ended.append(f"{s.name} in {lo}..{hi}")
        spans[s] = (lo, hi)
    window = f" (over {', '.join(sorted(open_ended))})" if open_ended else ""
    grid = holding_grid(predicate, spans, max_points=COUNTED)
    if grid is not None:
        count, total = int(grid.mask.sum()), grid.mask.size
        names = ", ".join(s.name for s in grid.symbols)
        runs = [_runs(grid.values(k)) for k in range(len(grid.symbols))]
        listed = count and not any(r is None for r in runs)          # a comb of sizes is a count alone
        share = f", {_percent(count / total)}" if total > limit else ""
        values = ": " + ", ".join(f"{s.name} in {r}" for s, r in zip(grid.symbols, runs)) if listed else ""
        return f"{count} of {total} ({names})" + window + share + values
    per_dim = max(2, int(limit ** (1 / len(spans))))
    steps, strided = {}, {}
    for s, (lo, hi) in spans.items():
        step = max(1, -(-(hi - lo) // (per_dim - 1)))
        index = Symbol(f"_{s.name}_k", integer=True)
        steps[index] = (0, (hi - lo) // step)
        strided[s] = lo + step * index
    grid = holding_grid(F.substitute(predicate, strided), steps, max_points=4 * limit)
    if grid is None:
        return None
    names = ", ".join(sorted(s.name for s in spans))
    hits = int(grid.mask.sum())
    if hits in (0, grid.mask.size):        # a sample is no proof of none or all (a check with a period)
        return (f"{'none' if hits == 0 else 'all'} of an even grid of {grid.mask.size} sizes of ({names})"
                f"{window}")
    share = _percent(hits / grid.mask.size)
    about = "" if share.startswith(("under", "over")) else "about "
    return f"{about}{share} of ({names}){window}, on an even grid of {grid.mask.size}"


UNBOUNDED_WINDOW = 256       # sizes from a dim's lower end counted where it has no upper one (Dim.AUTO)
# boxes counted point by point up to this size (numpy; a float power evaluates lane by lane in Python, about
# 1 s a million)
COUNTED = 1 << 20


def _percent(share: float) -> str:
    """A share as a message says it: 0% and 100% only when exactly so."""
    if share in (0, 1):
        return f"{share:.0%}"
    return "under 1%" if share < 0.01 else "over 99%" if share > 0.99 else f"{share:.0%}"


def _runs(values: list[int], most: int = 4) -> str | None:
    """``[2, 3, 4, 7]`` as ``2..4, 7``; None for more than ``most`` runs."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    if len(runs) > most:
        return None
    text = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs)
    return text if len(runs) == 1 else "{" + text + "}"


def python_guard(predicate: F.Formula, sources: dict[Symbol, str]) -> str | None:
    """``predicate`` as a Python expression torch's ExportedProgram evaluates as an input check.

    Returns None when a variable has no input source (nothing to read it from).
    """
    if not predicate.free_symbols <= sources.keys():
        return None
    return guard_code(predicate, sources)
