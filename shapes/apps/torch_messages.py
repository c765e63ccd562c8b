"""torch.export's own error messages, read back into guards the engine can explain.

torch prints its constraint violations and data-dependent errors as prose
around sympy text: ``Not all values of T = L['x'].size()[1] in the specified
range T <= 1024 satisfy the generated guard (L['x'].size()[1] % 4) != 0.``
This module finds every guard in such text (one message, or a whole log),
with the ranges and input paths the text gives, rewrites input paths to the
Dim names, and explains each guard with the engine.  Pure text processing
with regular expressions and the safe parser: no torch, no ``eval``.

Formats read (torch 2.x): ``Not all values of ... satisfy the generated
guard ...``; ``... are valid because D was inferred to be equal to E`` (or
``a constant (N)``), also for ``RelaxedUnspecConstraint(...)`` dims; ``The
values of A = ... and B = ... must always be equal`` / ``related ... by``;
``You marked D as dynamic but your code specialized it to be a constant
(N)``; ``solving the guards generated for ... resulted in a specialized value
of N``; ``Could not guard on data-dependent expression E`` and ``Could not
extract specialized integer from data-dependent expression E``; and
dynamo's ``Data-dependent branching`` with the traced branch condition.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from shapeproof.solver import DEFAULT_TIMEOUT, ParseError, parse_condition

from shapeproof.shapes import Explanation, Frame, Provenance, explain_guard

__all__ = ["IMPLICIT_SIZE_RANGE", "TorchGuard", "explain_messages", "explain_torch_error", "find_guards",
           "readable"]

# torch's default range for a backed size (0 and 1 are specialized); its messages omit bounds at or past it
IMPLICIT_SIZE_RANGE = (2, None)

# An input path as torch prints it: L['x'].size()[2], L['args'][0].stride()[1], L['self']._modules['c'].n
_PATH = re.compile(r"\b[LG]\[(?:'[^'\]\n]*'|\d+)\](?:\[(?:'[^'\]\n]*'|-?\d+)\]|\.[A-Za-z_]\w*(?:\(\d*\))?)*")
# "Not all values of VAR[ in the specified range RANGE] satisfy the generated guard G" / "... are valid
# because WHO was inferred to be equal to E" / "... a constant (N)": read by _not_all with str.find, since a
# regular expression with two lazy parts backtracks cubically over a long line of such phrases
_NOT_ALL_START, _IN_RANGE = "Not all values of ", " in the specified range"
_SATISFY, _VALID = " satisfy the generated guard ", " are valid because "
_INFERRED = re.compile(r"(?P<who>\S+) was inferred to be "
                       r"(?:equal to (?P<equal>[^\n]+)|a constant \((?P<const>-?\d+)\))")
_EQUAL = re.compile(r"The values of (?P<a>\S+ = \S+) and (?P<b>\S+ = \S+) must always be equal")
_RELATED = re.compile(r"The values of (?P<a>\S+ = \S+) must always be related to the values of "
                      r"(?P<b>\S+ = \S+) by (?P<lhs>\S+) = (?P<rhs>[^\n]+)")
_MARKED = re.compile(r"You marked (?P<var>\S+) as dynamic but your code specialized it to be a constant "
                     r"\((?P<value>-?\d+)\)")
# "Could not guard on data-dependent expression E (unhinted: ...).  (Size-like symbols: u0)" and
# "solving the guards generated for V resulted in a specialized value of N": read by _data and _solved from
# each start phrase within its line, since lazy parts over a long line backtracked quadratically
_DATA_START = re.compile(r"Could not (?P<what>guard on|extract specialized integer from) "
                         r"data-dependent expression ")
_UNHINTED = re.compile(r" \(unhinted: [^\n]*?\)\.\s+\(Size-like symbols: (?P<sl>[^)\n]*)\)")
_SOLVED_START, _SOLVED_VALUE = "solving the guards generated for ", " resulted in a specialized value of "
_VALUE = re.compile(r"-?\d+")
_BRANCH = re.compile(r"Data-dependent branching")
_BLOCK_START = re.compile(r"Constraints violated \(|Data-dependent branching|Could not (?:guard on|extract)")
_BRANCH_END = re.compile(r"\n\s*(?:Hint:|Developer debug context|from user code:|For more details)")
_FX_NODE = re.compile(r"^\s*(?P<var>\w+) = (?P<op>[\w.]+)\((?P<args>[^()\n]*)\)\s*$", re.MULTILINE)
_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d{1,9}), in (?P<fn>[^\s,]+)'
                    r"(?:, code: (?P<code>[^\n]*)|\n[ \t]*(?P<next>[^\n]*))?")
_FIXES = re.compile(r"Suggested fixes:\n((?:[ \t]+\S[^\n]*\n?)+)")
_RANGE_BOUND = re.compile(r"-?\d{1,60}")     # longer is no size (and int() refuses past 4300 digits)
_UNBACKED = re.compile(r"u\d+")
_BACKED = re.compile(r"s\d+")
_COMPARE = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "==", "ne": "!="}
_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


@dataclass
class TorchGuard:
    """One guard found in torch's text, in Dim names, with what the text says about its symbols.

    ``ranges`` are the ranges torch reasoned over (bounds the text omits are
    torch's implicit ones; ``notes`` say which); ``sources`` map names to
    readable input paths; ``where`` is the user frame the text names, if any.
    """

    guard: str
    ranges: dict[str, tuple]
    sources: dict[str, str]
    # constraint / equality / specialization / data-dependent / data-dependent value
    kind: str
    line: str                   # torch's text it came from
    notes: list[str] = field(default_factory=list)
    where: Frame | None = None


def readable(source: str) -> str:
    """``L['x'].size()[1]`` -> ``x.size(1)``: how the input dim reads in the user's code."""
    m = re.fullmatch(r"[LG]\['([^']+)'\]((?:\[[^\]]+\])*)(?:\.size\(\)\[(\d+)\])?", source)
    if m is None:
        m = re.fullmatch(r"[LG]\['([^']+)'\](.*)", source)
        return m.group(1) + m.group(2) if m else source
    path = m.group(1) + m.group(2)
    return f"{path}.size({m.group(3)})" if m.group(3) is not None else path


def _implicit_range(path: str) -> tuple:
    """What torch assumes for a symbol the text gives no range for."""
    if ".storage_offset()" in path:
        return (0, None)
    if path.startswith(("L[", "G[")) and not re.search(r"\.(size|stride)\(\)|\.shape", path):
        return (None, None)     # an int input: unspecialized ints may take any value
    return IMPLICIT_SIZE_RANGE


class _Names:
    """Input paths <-> the names guards are written in, with their ranges, over one text."""

    def __init__(self):
        self.by_path: dict[str, str] = {}
        self.paths: dict[str, str] = {}
        self.ranges: dict[str, tuple] = {}
        self.notes: dict[str, list[str]] = {}

    def declare(self, var: str, range_text: str | None = None) -> str:
        """Register ``T = L['x'].size()[1]`` (or a bare path or Dim name); returns the name."""
        name, _, path = var.partition(" = ")
        relaxed = re.fullmatch(r"RelaxedUnspecConstraint\((.+)\)", var.strip())
        if relaxed:
            name, path = "", relaxed.group(1)
        elif not path and _PATH.fullmatch(name.strip()):
            name, path = "", name
        name, path = name.strip(), path.strip()
        if path and path in self.by_path:
            name = self.by_path[path]
        elif not _DIM_NAME.fullmatch(name) or name.startswith("__"):
            name = self._fresh(path or name)
        if path:
            self.by_path.setdefault(path, name)
            self.paths.setdefault(name, path)
        if name not in self.ranges:
            self.ranges[name], self.notes[name] = self._range(name, range_text, path)
        return name

    def _fresh(self, path: str) -> str:
        base = re.sub(r"\W+", "_", readable(path)).strip("_") or "d"
        base = base if base[0].isalpha() else f"d_{base}"
        name, k = base, 1
        while name in self.paths or name in self.ranges:
            k += 1
            name = f"{base}_{k}"
        return name

    @staticmethod
    def _range(name: str, text: str | None, path: str) -> tuple[tuple, list[str]]:
        implicit = _implicit_range(path)
        if text is None or not text.strip():
            shown = f"[{implicit[0] if implicit[0] is not None else '-inf'}, inf)"
            why = "the text gives no range" if text is None else "the declared range is torch's default"
            return implicit, [f"{why} for {name}: using torch's implicit range {shown}"]
        parts = [p.strip() for p in text.split("<=")]
        lo_text = parts[0] if len(parts) == 3 or (len(parts) == 2
                                                  and _RANGE_BOUND.fullmatch(parts[0])) else None
        hi_text = parts[-1] if len(parts) == 3 or (len(parts) == 2 and lo_text is None) else None
        lo = int(lo_text) if lo_text and _RANGE_BOUND.fullmatch(lo_text) else None
        hi = int(hi_text) if hi_text and _RANGE_BOUND.fullmatch(hi_text) else None
        notes = []
        if lo is not None and hi is not None and lo > hi:
            # an empty range would prove every guard vacuously
            notes.append(f"the text gives an empty range for {name} ({lo} > {hi}): using no upper bound")
            hi = None
        if lo is None and implicit[0] is not None:
            lo = implicit[0]
            notes.append(f"torch omits a lower bound at or below its default; using {name} >= {lo} "
                         "(0 and 1 are specialized)")
        return (lo, hi), notes

    def rename(self, text: str) -> str:
        """Rewrite every input path in guard text to its name, registering unknown paths."""
        def repl(m: re.Match) -> str:
            return self.by_path.get(m.group()) or self.declare(m.group())
        return _PATH.sub(repl, text)


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:-1].rstrip() if text.endswith(".") else text


def _frame(region: str) -> Frame | None:
    """The innermost user frame a message region names (the last ``File ...`` line)."""
    frames = list(_FRAME.finditer(region))
    if not frames:
        return None
    m = frames[-1]
    code = (m.group("code") or m.group("next") or "").strip()
    return Frame(m.group("file"), int(m.group("line")), m.group("fn"), code)


def _branch_guard(region: str) -> tuple[str, str] | None:
    """Dynamo's data-dependent branch as (condition, the traced lines up to it).

    The condition is the last traced node, e.g. ``ge = ge(max_pad, 4800)`` ->
    ``max_pad >= 4800``; a node that is not a comparison is tested for truth.
    """
    start = region.find("computed as follows:")
    if start < 0:
        return None
    end = _BRANCH_END.search(region, start)
    nodes = list(_FX_NODE.finditer(region, start, end.start() if end else len(region)))
    if not nodes:
        return None
    m = nodes[-1]
    args = [a.strip().lstrip("_") for a in m.group("args").split(",") if a.strip()]
    op = m.group("op").rsplit(".", 1)[-1]
    if op in _COMPARE and len(args) == 2:
        guard = f"{args[0]} {_COMPARE[op]} {args[1]}"
    else:
        guard = f"{m.group('var').lstrip('_')} != 0"
    return guard, region[start:m.end()]


def _suggested_fixes(block: str) -> list[str]:
    m = _FIXES.search(block)
    return [line.strip() for line in m.group(1).splitlines() if line.strip()] if m else []


def _blocks(text: str) -> list[str]:
    """The text cut where each torch message begins, so fixes and frames stay with their message."""
    starts = sorted({0, *(m.start() for m in _BLOCK_START.finditer(text))})
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


@dataclass(frozen=True)
class _Statement:
    """A statement read from a start phrase to its end within one line: where, its text, its parts."""

    start: int
    text: str
    parts: dict

    def group(self, name: str):
        return self.parts.get(name)


class _Scanner:
    """Forward searches in one text, each resuming where the last one for the same phrase stopped.

    Reading every statement of a long line then takes time linear in the line: a
    search per statement from its start to the end of its line (and a copy of
    that rest of the line) took time quadratic in it (1 MB of "Not all values of "
    took 32 s).  Searches for a phrase go left to right; one that goes back
    searches again.
    """

    def __init__(self, text: str):
        self.text = text
        self._hits: dict[str, tuple[int, int]] = {}     # phrase -> (searched from, first hit there, or -1)

    def find(self, phrase: str, pos: int) -> int:
        """The first occurrence of ``phrase`` at or after ``pos``, or -1."""
        since, hit = self._hits.get(phrase, (-1, -1))
        if pos < since or since < 0 or 0 <= hit < pos:
            hit = self.text.find(phrase, pos)
            self._hits[phrase] = (pos, hit)
        return hit

    def line_end(self, pos: int) -> int:
        end = self.find("\n", pos)
        return len(self.text) if end < 0 else end

    def after_in_line(self, phrase: str, pos: int) -> int:
        """The first occurrence of ``phrase`` after ``pos`` in ``pos``'s line (-1 if there is none, or the
        first one is at ``pos``)."""
        hit = self.find(phrase, pos)
        return hit if pos < hit < self.line_end(pos) else -1


def _not_all(text: str) -> list[_Statement]:
    """Every "Not all values of ..." statement of ``text``, in order (parts ``var``, ``range`` and one of
    ``guard``, ``equal``, ``const``); each is read within its line, in time linear in the text."""
    scan, found, inferred = _Scanner(text), [], {}
    start = scan.find(_NOT_ALL_START, 0)
    while start >= 0:
        body = start + len(_NOT_ALL_START)
        end = scan.line_end(body)
        cuts = [(i, t) for t in (_SATISFY, _VALID) if (i := scan.after_in_line(t, body)) > 0]
        resume = body
        if cuts:
            cut, kind = min(cuts)
            after = cut + len(kind)
            if kind == _VALID and after not in inferred:    # every start before it on the line reads the same
                inferred[after] = _INFERRED.match(text, after, end)
            m = inferred.get(after) if kind == _VALID else None
            if (kind == _SATISFY and after < end) or m is not None:
                var, sep, rng = text[body:cut].partition(_IN_RANGE)
                named = {"var": var, "range": rng if sep else None}
                if var and m is None:
                    found.append(_Statement(start, text[start:end], {**named, "guard": text[after:end]}))
                    resume = end
                elif var and m is not None:
                    found.append(_Statement(start, text[start:m.end()],
                                            {**named, "equal": m.group("equal"), "const": m.group("const")}))
                    resume = m.end()
        # like a regular expression's matches, statements do not overlap
        start = scan.find(_NOT_ALL_START, resume)
    return found


def _data(text: str) -> list[_Statement]:
    """Every "Could not guard on / extract specialized integer from data-dependent expression E" statement:
    E up to a following "(unhinted: ...).  (Size-like symbols: ...)", else to the end of its line."""
    scan, found, tails, resume = _Scanner(text), [], {}, 0
    for m in _DATA_START.finditer(text):
        if m.start() < resume:
            continue                            # statements do not overlap
        end = scan.line_end(m.end())
        cut = scan.after_in_line(" (unhinted: ", m.end())
        if cut > 0 and cut not in tails:        # every start before it on the line reads the same
            tails[cut] = _UNHINTED.match(text, cut)
        tail = tails.get(cut) if cut > 0 else None
        if tail is not None:
            found.append(_Statement(m.start(), text[m.start():tail.end()], {
                "what": m.group("what"), "expr": text[m.end():cut], "sl": tail.group("sl")}))
            resume = tail.end()
            continue
        expr = text[m.end():end].rstrip(" \t")
        expr = expr[:-1] if expr.endswith(".") else expr
        if expr:
            found.append(_Statement(m.start(), text[m.start():end],
                                    {"what": m.group("what"), "expr": expr, "sl": None}))
            resume = end
    return found


def _solved(text: str) -> list[_Statement]:
    """Every "solving the guards generated for V resulted in a specialized value of N" statement."""
    scan, found = _Scanner(text), []
    start = scan.find(_SOLVED_START, 0)
    while start >= 0:
        body = start + len(_SOLVED_START)
        cut = scan.after_in_line(_SOLVED_VALUE, body)
        value = _VALUE.match(text, cut + len(_SOLVED_VALUE)) if cut > 0 else None
        resume = body
        if value is not None:
            found.append(_Statement(start, text[start:value.end()],
                                    {"var": text[body:cut], "value": value.group()}))
            resume = value.end()
        start = scan.find(_SOLVED_START, resume)
    return found


def _items(block: str, names: _Names):
    """(guard, kind, line, region) for every guard statement of one message, in order."""
    found: list[tuple] = []
    for n in _not_all(block):
        name = names.declare(n.group("var"), n.group("range"))
        if n.group("guard") is not None:
            found.append((n.start, names.rename(_sentence(n.group("guard"))), "constraint", n.text))
        elif n.group("const") is not None:
            found.append((n.start, f"{name} == {n.group('const')}", "specialization", n.text))
        else:
            equal = names.rename(_sentence(n.group("equal") or ""))
            found.append((n.start, f"{name} == ({equal})", "equality", n.text))
    for m in _EQUAL.finditer(block):
        found.append((m.start(), f"{names.declare(m.group('a'))} == {names.declare(m.group('b'))}",
                      "equality", m.group()))
    for m in _RELATED.finditer(block):
        names.declare(m.group("a"))
        names.declare(m.group("b"))
        found.append((m.start(), f"{m.group('lhs')} == {_sentence(m.group('rhs'))}", "equality", m.group()))
    marked = [_Statement(m.start(), m.group(), m.groupdict()) for m in _MARKED.finditer(block)]
    for st in (*marked, *_solved(block)):
        found.append((st.start, f"{names.declare(_sentence(st.group('var')))} == {st.group('value')}",
                      "specialization", st.text))
    for d in _data(block):
        kind = "data-dependent" if d.group("what") == "guard on" else "data-dependent value"
        found.append((d.start, names.rename(d.group("expr").strip()), kind, d.text))
    found = [(pos, guard, kind, line, block[pos:]) for pos, guard, kind, line in found]
    if _BRANCH.match(block) and (branch := _branch_guard(block)) is not None:
        found.append((0, branch[0], "data-dependent", block.splitlines()[0], branch[1]))
    found.sort(key=lambda item: item[0])
    return [item[1:] for item in found]


def _size_like(block: str) -> set[str]:
    data = _data(block)
    names = (data[0].group("sl") or "none").strip() if data else "none"
    return set() if names == "none" else {n.strip() for n in names.split(",")}


def _symbols(guard: str, kind: str) -> list[str] | None:
    try:
        value = parse_condition(guard) if kind != "data-dependent value" else None
    except ParseError:
        return None
    if value is None:
        return sorted(set(re.findall(r"\b[us]\d+\b", guard)))
    return sorted(s.name for s in value.free_symbols)


def find_guards(text: str) -> list[TorchGuard]:
    """Every guard in torch's error text or log, deduplicated, in order of appearance."""
    names = _Names()
    for n in _not_all(text):                # Dim names first: a guard may mention a dim named later
        names.declare(n.group("var"), n.group("range"))
    for m in (*_EQUAL.finditer(text), *_RELATED.finditer(text)):
        names.declare(m.group("a"))
        names.declare(m.group("b"))
    out: list[TorchGuard] = []
    seen: set[tuple] = set()
    for block in _blocks(text):
        fixes, size_like = _suggested_fixes(block), _size_like(block)
        for guard, kind, line, region in _items(block, names):
            data = kind.startswith("data-dependent")
            ranges, notes = {}, []
            for name in _symbols(guard, kind) or ():
                if name in names.ranges:
                    ranges[name] = names.ranges[name]
                    notes += names.notes[name]
                elif _UNBACKED.fullmatch(name):
                    ranges[name] = (0, None) if name in size_like else (None, None)
                    notes.append(f"{name} is unbacked (data-dependent): " + (
                        "size-like, so its range is [0, inf)" if name in size_like
                        else "not size-like, so its range is (-inf, inf)"))
                elif _BACKED.fullmatch(name):
                    ranges[name] = IMPLICIT_SIZE_RANGE
                    notes.append(f"{name} is a backed size torch names without its input: using [2, inf)")
                elif data:
                    ranges[name] = (None, None)
                    notes.append(f"{name} is computed from tensor data: no range known, so (-inf, inf)")
            if fixes and kind == "constraint":
                notes.append("torch suggested: " + "; ".join(fixes))
            key = (guard, tuple(sorted(ranges.items())))
            if key in seen:
                continue
            seen.add(key)
            sources = {n: readable(names.paths[n]) for n in ranges if n in names.paths}
            out.append(TorchGuard(guard, ranges, sources, kind, line.strip(), notes,
                                  _frame(region) if data or kind == "specialization" else None))
    return out


_ADVICE = ("torch needs a fixed answer here while tracing; make the code branch-free (torch.where, "
           "torch.cond) or state what holds with torch._check(...) before it")


def _unexplained(found: TorchGuard, index: int, reason: str) -> Explanation:
    where = Provenance(found.where).to_dict() if found.where else None
    return Explanation("guard", index, found.guard, found.guard, where, [], "not checked", None, None,
                       notes=[reason, *found.notes])


def explain_torch_error(text: str, strategy="cascade", timeout: float = DEFAULT_TIMEOUT,
                        max_guards: int | None = None, budget: float | None = None
                        ) -> list[tuple[TorchGuard, Explanation]]:
    """Each guard of torch's text (the first ``max_guards``), explained by the engine.

    ``timeout`` bounds each solver call; ``budget`` (seconds, optional) bounds
    the whole text: guards left when it runs out are reported "not checked".
    """
    deadline = None if budget is None else time.monotonic() + budget
    out = []
    for index, found in enumerate(find_guards(text)[:max_guards]):
        left = None if deadline is None else deadline - time.monotonic()
        if found.kind == "data-dependent value":
            ex = _unexplained(found, index, "torch needed a concrete integer for this data-dependent value; "
                                            + _ADVICE)
        elif left is not None and left <= 0:
            ex = _unexplained(found, index, "time budget used up before this guard")
        else:
            try:
                ex = explain_guard(found.guard, found.ranges, sources=found.sources, strategy=strategy,
                                   timeout=timeout if left is None else max(0.05, min(timeout, left)),
                                   where=Provenance(found.where) if found.where else None)
            except (ParseError, ValueError, RecursionError) as exc:
                ex = _unexplained(found, index, f"not explained: {str(exc).splitlines()[0]}")
            else:
                ex.index = index
                ex.notes.extend(found.notes)
                if found.kind == "data-dependent":
                    ex.fixes = []           # Dim-range fixes do not apply to values computed from data
                    ex.notes.append(_ADVICE)
        out.append((found, ex))
    return out


def explain_messages(text: str, strategy="cascade", timeout: float = DEFAULT_TIMEOUT,
                     max_guards: int | None = None, budget: float | None = None) -> list[Explanation]:
    """The explanation of each guard in torch's error text or log (see ``explain_torch_error``)."""
    return [ex for _, ex in explain_torch_error(text, strategy, timeout, max_guards, budget)]
