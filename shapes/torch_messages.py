"""torch.export's own error messages, read back into guards the engine can explain.

torch prints its constraint violations and data-dependent errors as prose
around sympy text: ``Not all values of T = L['x'].size()[1] in the specified
range T <= 1024 satisfy the generated guard (L['x'].size()[1] % 4) != 0.``
This module finds every guard in such text (a message, or a whole log), with
the ranges and input paths the message gives, rewrites input paths to the
Dim names, and explains each guard with the engine.  Pure text processing
with regular expressions and the safe parser: no torch, no ``eval``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from shapeproof.solver.api import DEFAULT_TIMEOUT

from .explain import Explanation
from .standalone import explain_guard

__all__ = ["TorchGuard", "find_guards", "explain_torch_error", "IMPLICIT_SIZE_RANGE"]

# torch.export's documented default for a dynamic backed size; its messages omit a lower bound of 2
IMPLICIT_SIZE_RANGE = (2, None)

_SOURCE = r"L\[[^\]]+\](?:\[[^\]]+\])*(?:\.size\(\)\[\d+\])?"
_NOT_ALL = re.compile(rf"Not all values of (?P<name>\w+) = (?P<source>{_SOURCE}) in the specified range "
                      rf"(?P<range>.+?) satisfy the generated guard (?P<guard>.+)$")
_EQUAL = re.compile(rf"The values of (?P<a>\w+) = (?P<sa>{_SOURCE}) and (?P<b>\w+) = (?P<sb>{_SOURCE}) "
                    r"must always be equal")
_RELATED = re.compile(rf"The values of (?P<a>\w+) = (?P<sa>{_SOURCE}) must always be related to the values of "
                      rf"(?P<b>\w+) = (?P<sb>{_SOURCE}) by (?P<lhs>\w+) = (?P<rhs>.+?)\.?$")
_MARKED = re.compile(r"You marked (?P<name>\w+) as dynamic but your code specialized it to be a constant "
                     r"\((?P<value>-?\d+)\)")
_SOLVED = re.compile(rf"solving the guards generated for (?P<name>\w+) = (?P<source>{_SOURCE}) resulted in a "
                     r"specialized value of (?P<value>-?\d+)")
_DATA = re.compile(r"Could not guard on data-dependent expression (?P<expr>.+?) \(unhinted")
_SIZE_LIKE = re.compile(r"Size-like symbols: (?P<names>[^)]*)\)")
_RANGE = re.compile(r"^(?:(?P<lo>-?\d+) <= )?(?P<name>\w+)(?: <= (?P<hi>-?\d+|int_oo|inf|oo))?$")
_UNBACKED = re.compile(r"\bu\d+\b")


@dataclass
class TorchGuard:
    """One guard found in torch's text, in Dim names, with what the text says about its symbols."""

    guard: str
    ranges: dict[str, tuple]
    sources: dict[str, str]
    kind: str                           # constraint / equality / specialization / data-dependent
    line: str                           # the line of torch's text it came from
    notes: list[str] = field(default_factory=list)


def readable(source: str) -> str:
    """``L['x'].size()[1]`` -> ``x.size(1)``: how the input dim reads in the user's code."""
    m = re.fullmatch(r"L\['([^']+)'\]((?:\[[^\]]+\])*)(?:\.size\(\)\[(\d+)\])?", source)
    if m is None:
        return source
    path = m.group(1) + m.group(2)
    return f"{path}.size({m.group(3)})" if m.group(3) is not None else path


def _range(text: str) -> tuple | None:
    m = _RANGE.match(text.strip())
    if m is None:
        return None
    lo = int(m.group("lo")) if m.group("lo") else IMPLICIT_SIZE_RANGE[0]
    hi = m.group("hi")
    return lo, (int(hi) if hi and hi.lstrip("-").isdigit() else None)


def _named(text: str, sources: dict[str, str]) -> str:
    """Replace input paths by Dim names, longest path first (``L['x'].size()[1]`` -> ``T``)."""
    for name, source in sorted(sources.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(source, name)
    return text


def find_guards(text: str) -> list[TorchGuard]:
    """Every guard in torch's error text or log, deduplicated, in order of appearance."""
    sources: dict[str, str] = {}          # Dim name -> torch source, over the whole text
    ranges: dict[str, tuple] = {}
    dims = {m.group("name") for m in _MARKED.finditer(text)}    # dims named without a source
    for line in text.splitlines():
        for pattern in (_NOT_ALL, _SOLVED):
            m = pattern.search(line)
            if m:
                sources.setdefault(m.group("name"), m.group("source"))
                if pattern is _NOT_ALL and (r := _range(m.group("range"))) is not None:
                    ranges.setdefault(m.group("name"), r)
        for m in (_EQUAL.search(line), _RELATED.search(line)):
            if m:
                sources.setdefault(m.group("a"), m.group("sa"))
                sources.setdefault(m.group("b"), m.group("sb"))

    found: list[TorchGuard] = []
    seen: set[str] = set()

    def add(guard: str, kind: str, line: str, notes=()):
        guard = _named(guard.strip(), sources)
        if guard in seen:
            return
        seen.add(guard)
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", guard)) - {"and", "or", "not", "math", "ceil", "floor",
                                                                "trunc", "Eq", "Ne", "Mod", "min", "max"}
        guard_ranges, guard_notes = {}, list(notes)
        for name in sorted(names):
            if name in ranges:
                guard_ranges[name] = ranges[name]
            elif _UNBACKED.fullmatch(name):
                size_like = name in _size_like(text)
                guard_ranges[name] = (0, None) if size_like else (None, None)
                guard_notes.append(f"{name} is a data-dependent value: "
                                   + ("size-like, so >= 0" if size_like else "no range given, so unbounded"))
            elif name in sources or name in dims:
                guard_ranges[name] = IMPLICIT_SIZE_RANGE
                guard_notes.append(f"torch's message gives no range for {name}; using torch.export's implicit "
                                   f"range for a dynamic size, [2, oo)")
        found.append(TorchGuard(guard, guard_ranges, {n: readable(s) for n, s in sources.items() if n in names},
                                kind, line.strip(), guard_notes))

    for line in text.splitlines():
        if m := _NOT_ALL.search(line):
            add(m.group("guard").rstrip().removesuffix("."), "constraint", line)
        elif m := _EQUAL.search(line):
            add(f"{m.group('a')} == {m.group('b')}", "equality", line)
        elif m := _RELATED.search(line):
            add(f"{m.group('lhs')} == {m.group('rhs')}", "equality", line)
        elif m := _MARKED.search(line):
            add(f"{m.group('name')} == {m.group('value')}", "specialization", line)
        elif m := _SOLVED.search(line):
            add(f"{m.group('name')} == {m.group('value')}", "specialization", line)
        elif m := _DATA.search(line):
            add(m.group("expr"), "data-dependent", line)
    return found


def _size_like(text: str) -> set[str]:
    m = _SIZE_LIKE.search(text)
    if m is None or m.group("names").strip() == "none":
        return set()
    return {n.strip() for n in m.group("names").split(",")}


def explain_torch_error(text: str, strategy="cascade", timeout: float = DEFAULT_TIMEOUT,
                        max_guards: int | None = None) -> list[tuple[TorchGuard, Explanation]]:
    """Each guard of torch's text (the first ``max_guards``), explained by the engine."""
    out = []
    for found in find_guards(text)[:max_guards]:
        explanation = explain_guard(found.guard, found.ranges, sources=found.sources, strategy=strategy,
                                    timeout=timeout)
        explanation.notes.extend(found.notes)
        out.append((found, explanation))
    return out
