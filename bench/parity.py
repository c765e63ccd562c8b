"""Parity with torch.export: every case of ``tests/parity_cases.py`` under torch.export and shapeproof.export.

    python -m bench.parity [--only substring] [--group G] [--timeout S] [--csv path] [--jobs 1]
                           [--probes full]

Each case runs in its own process, with a timeout (forked from a server that
has torch and shapeproof imported, so a case costs its exports, not an
interpreter start; one tiny export per exporter first, so that export times
compare).  It exports with ``torch.export.export(..., strict=False)``
and with ``shapeproof.export(...)`` (same arguments, the case's context around
both) and compares:

- exports or not (exception type and first line when not);
- range constraints: per input dim, the range each program accepts (the
  placeholder's symbolic size mapped through ``ep.range_constraints``; static
  dims are one value); shapeproof's must contain torch's;
- inputs accepted and rejected: shapes around both programs' ranges (the
  example, range ends, 0/1/2, values in between, one dim off the example,
  other values of 0-d integer inputs, the case's own probes), fresh random
  data; wherever torch's program accepts, shapeproof's must too, and wherever
  a program accepts, its outputs must match eager's (eager failing there
  while the program runs counts as a mismatch);
- errors: when both raise, a checklist per message (input dim, source line,
  offending value, fix); shapeproof's must have every item torch's has.

Prints a table per group and one line per problem; ``--csv`` writes the per-case rows.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import importlib
import logging
import multiprocessing
import re
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .executors import run_jobs

REPO = Path(__file__).resolve().parents[1]
REGISTRY_MODULE = "tests.parity_cases"      # repo root on sys.path; imported once per process server
EXPORTERS = ("torch", "shapeproof")
# problems that must not happen; the others are information
MUST_BE_ZERO = ("torch_only", "narrower_range", "narrower_acceptance", "eager_mismatch", "less_informative",
                "silent_narrowing", "timeout", "harness", "other_error_class", "unrefinable")
CHECKLIST = ("input_dim", "source_line", "value", "fix")
MAX_NUMEL = 1 << 20


def load_cases() -> dict:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module(REGISTRY_MODULE).CASES


# ---------------------------------------------------------------------------------------------- exports

@dataclass
class Outcome:
    """One exporter's result on a case: the program, or the exception it raised."""
    exporter: str
    program: object = None
    error: BaseException | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        out = {"status": "exported" if self.error is None else "failed", "seconds": round(self.seconds, 3),
               "warnings": self.warnings}
        if self.error is not None:
            out.update(error_type=type(self.error).__name__, error=first_line(self.error),
                       message=str(self.error)[:8000])
        return out


def first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def export_with(exporter: str, case) -> Outcome:
    import torch

    model, args, kwargs, spec = case.build()
    start = time.perf_counter()
    with case.context(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if exporter == "torch":
                program = torch.export.export(model, args, kwargs, dynamic_shapes=spec, strict=False)
            else:
                import shapeproof

                program = shapeproof.export(model, args, kwargs, dynamic_shapes=spec)
            outcome = Outcome(exporter, program, None, time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - any exception is an outcome to compare
            outcome = Outcome(exporter, None, exc, time.perf_counter() - start)
    if exporter == "shapeproof":
        outcome.warnings = [str(w.message)[:500] for w in caught if "shapeproof" in str(w.message)]
    return outcome


# ---------------------------------------------------------------------------------------------- input dims

@dataclass
class Layout:
    """The case's inputs, flattened: the leaves, and a slot per tensor dim and per int input."""
    leaves: list
    treespec: object
    paths: list[str]                         # pytree key path of each leaf in (args, kwargs)
    names: list[str]                         # the same, with argument names
    slots: list[tuple[int, int | None]] = field(default_factory=list)   # (leaf, dim); dim None: int leaf
    example: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, model, args, kwargs) -> Layout:
        import inspect

        import torch
        import torch.utils._pytree as pytree

        flat, treespec = pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        layout = cls([leaf for _, leaf in flat], treespec, [pytree.keystr(p) for p, _ in flat], [])
        for i, (path, leaf) in enumerate(flat):
            layout.names.append(_readable(path, params))
            if isinstance(leaf, torch.Tensor):
                for d, size in enumerate(leaf.shape):
                    layout.slots.append((i, d))
                    layout.example.append(int(size))
            elif type(leaf) is int:
                layout.slots.append((i, None))
                layout.example.append(leaf)
        return layout

    def slot_name(self, slot) -> str:
        leaf, dim = slot
        return self.names[leaf] if dim is None else f"{self.names[leaf]}.size({dim})"

    def inputs(self, sizes, values: dict | None = None, seed: int = 0):
        """(args, kwargs) of fresh tensors with the given slot sizes; ``values`` fixes one-element integer
        leaves."""
        import torch
        import torch.utils._pytree as pytree

        gen = torch.Generator().manual_seed(seed)
        at = dict(zip(self.slots, sizes))
        new = []
        for i, leaf in enumerate(self.leaves):
            if isinstance(leaf, torch.Tensor):
                new.append(_fresh(leaf, [at[(i, d)] for d in range(leaf.dim())], gen, (values or {}).get(i)))
            elif type(leaf) is int:
                new.append(at[(i, None)])
            else:
                new.append(copy.deepcopy(leaf))
        args, kwargs = pytree.tree_unflatten(new, self.treespec)
        return tuple(args), dict(kwargs)


def _readable(path, params: list[str]) -> str:
    """``[0][1]['k']`` -> ``y['k']`` (argument names instead of positions)."""
    import torch.utils._pytree as pytree

    top, index, rest = path[0].idx, path[1], pytree.keystr(path[2:])
    if top == 0:
        i = index.idx
        return (params[i] if i < len(params) else f"args[{i}]") + rest
    return f"{index.key}{rest}"


def _fresh(like, shape, gen, value=None):
    """A new tensor of ``shape`` with ``like``'s dtype and plausible values (integers keep their value
    range)."""
    import torch

    if like.dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if like.dtype.is_floating_point or like.dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=like.dtype)
    if value is not None:
        return torch.full(shape, value, dtype=like.dtype)
    if like.numel() == 0:
        return torch.zeros(shape, dtype=like.dtype)
    lo, hi = int(like.min()), int(like.max())
    return torch.randint(lo, hi + 1, shape, generator=gen, dtype=like.dtype)


def program_dims(program, layout: Layout) -> dict | None:
    """Slot -> the program's size expression (a sympy expression, or an int for a static dim)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.export.graph_signature import InputKind

    example = getattr(program, "example_inputs", None)
    if example is None:
        return None
    flat, _ = pytree.tree_flatten_with_path(example)
    specs = [s for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if len(flat) != len(specs):
        return None
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    value_at = {}
    for (path, _), spec in zip(flat, specs):
        node = nodes.get(getattr(spec.arg, "name", None))
        value_at[pytree.keystr(path)] = (node.meta.get("val") if node is not None
                                         else getattr(spec.arg, "value", None))

    def expr(size):
        if isinstance(size, torch.SymInt):
            e = size.node.expr
            return int(e) if e.is_number else e
        return int(size)

    dims = {}
    for slot in layout.slots:
        leaf, d = slot
        val = value_at.get(layout.paths[leaf])
        if val is None:
            return None
        dims[slot] = expr(val) if d is None else expr(val.shape[d])
    return dims


def _bound(v) -> int | None:
    """A range end as an int; None for torch's unbounded ends (``int_oo``, ``-int_oo``)."""
    return None if str(v).lstrip("-") in ("int_oo", "oo") else int(v)


def _at(expr, symbol, value) -> int:
    import sympy

    return int(expr.xreplace({symbol: sympy.Integer(value)}))


def slot_range(expr, ranges) -> tuple[int | None, int | None] | None:
    """The values a slot takes over its program's range constraints; None when not an expression of one
    symbol."""
    if isinstance(expr, int):
        return expr, expr
    if len(expr.free_symbols) != 1:
        return None
    s = next(iter(expr.free_symbols))
    vr = ranges.get(s)
    lo, hi = (_bound(vr.lower), _bound(vr.upper)) if vr is not None else (None, None)
    slope = _at(expr, s, 1) - _at(expr, s, 0)
    ends = [None if lo is None else _at(expr, s, lo), None if hi is None else _at(expr, s, hi)]
    return tuple(ends) if slope >= 0 else tuple(reversed(ends))


def contains(outer, inner) -> bool:
    """Whether the range ``outer`` contains ``inner`` (``None`` ends are unbounded)."""
    lo_ok = outer[0] is None or (inner[0] is not None and outer[0] <= inner[0])
    hi_ok = outer[1] is None or (inner[1] is not None and inner[1] <= outer[1])
    return lo_ok and hi_ok


def symbol_examples(dims: dict, layout: Layout) -> dict:
    """Each symbol's value at the example input (solved from the slots it sizes)."""
    out = {}
    for slot, e in dims.items():
        if isinstance(e, int) or len(e.free_symbols) != 1:
            continue
        s = next(iter(e.free_symbols))
        b, a = _at(e, s, 0), _at(e, s, 1) - _at(e, s, 0)
        size = layout.example[layout.slots.index(slot)]
        if a and (size - b) % a == 0 and s not in out:
            out[s] = (size - b) // a
    return out


# ---------------------------------------------------------------------------------------------- probes

def probes(layout: Layout, programs: dict, level: str) -> list[tuple]:
    """Probe points ``(sizes, values)``: from each program's symbols, one dim off the example, other int
    values."""
    import torch

    full = level == "full"
    points = [(tuple(layout.example), ())]
    for dims, ranges in programs.values():
        examples = symbol_examples(dims, layout)
        for s, v in examples.items():
            vr = ranges.get(s)
            lo = _bound(vr.lower) if vr is not None else None
            hi = _bound(vr.upper) if vr is not None else None
            lo = max(lo, 0) if lo is not None else 0
            cap = max(2 * v + 4, lo + 4, 8)
            top = cap if hi is None else min(hi, cap)
            values = {lo - 1, lo, v + 1, top}
            if full:
                values |= {0, 1, 2, v - 1, (lo + top) // 2, 2 * v + 1}
                if hi is not None and hi + 1 <= 4 * cap:
                    values.add(hi + 1)
            for value in sorted(x for x in values if x >= 0):
                points.append((_sizes(dims, layout, {**examples, s: value}), ()))
        if examples:
            for pick in (lambda s, v: v + 1, lambda s, v: 2 * v + 1):
                points.append((_sizes(dims, layout, {s: pick(s, v) for s, v in examples.items()}), ()))
    dynamic = {slot for dims, _ in programs.values() for slot, e in dims.items() if not isinstance(e, int)}
    for k, slot in enumerate(layout.slots):
        if full or slot in dynamic:
            for delta in ((1, -1) if full else (1,)):
                sizes = list(layout.example)
                sizes[k] += delta
                if sizes[k] >= 0 or slot[1] is None:
                    points.append((tuple(sizes), ()))
    for i, leaf in enumerate(layout.leaves):
        if isinstance(leaf, torch.Tensor) and leaf.numel() == 1 and not leaf.dtype.is_floating_point \
                and not leaf.dtype.is_complex and leaf.dtype != torch.bool:
            v = int(leaf.item())
            for value in ((v + 1, 0, v - 1, 2 * v + 2) if full else (v + 1, 0)):
                points.append((tuple(layout.example), ((i, value),)))
    unique = []
    for p in points:
        if p not in unique and _small(layout, p[0]):
            unique.append(p)
    return unique


def _sizes(dims, layout, assign) -> tuple:
    import sympy

    subs = {s: sympy.Integer(v) for s, v in assign.items()}
    out = []
    for slot, example in zip(layout.slots, layout.example):
        e = dims.get(slot, example)
        out.append(e if isinstance(e, int) else int(e.xreplace(subs)) if e.free_symbols <= subs.keys()
                   else example)
    return tuple(out)


def _small(layout, sizes) -> bool:
    numel: dict[int, int] = {}
    for (leaf, dim), size in zip(layout.slots, sizes):
        if dim is not None:
            if size < 0:
                return False
            numel[leaf] = numel.get(leaf, 1) * size
    return all(n <= MAX_NUMEL for n in numel.values())


def call(fn, inputs):
    """``("ok", outputs)`` or ``("error", "Type: first line")``, on a private copy of the inputs."""
    import torch

    args, kwargs = copy.deepcopy(inputs)
    torch.manual_seed(0)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a program rejecting an input raises anything
        return "error", f"{type(exc).__name__}: {first_line(exc)}"


def differs(got, expected) -> str | None:
    """Why ``got`` is not eager's ``expected`` (outputs flattened with pytree), or None when they match."""
    import torch
    import torch.utils._pytree as pytree

    g, e = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    if len(g) != len(e):
        return f"{len(g)} outputs, eager has {len(e)}"
    for k, (a, b) in enumerate(zip(g, e)):
        if isinstance(b, torch.Tensor) or isinstance(a, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return f"output {k}: {type(a).__name__} where eager has {type(b).__name__}"
            try:
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, equal_nan=True)
            except AssertionError as exc:
                return f"output {k}: {first_line(exc)}"
        elif a != b:
            return f"output {k}: {a!r} where eager has {b!r}"
    return None


# ---------------------------------------------------------------------------------------------- errors

_PATTERNS = {
    "input_dim": r"\.size\(\)\[\d+\]|\.size\(\d+\)|\.shape\[\d+\]",
    "source_line": r"\.py(\", line |:)\d+",
    "value": (r"\b(got|of|is|be) -?\d+\b|\bfails? at\b|counterexample|= -?\d+\b|\(-?\d+\)|not in range"
              r"|\[-?\d+, *(-?\d+|int_oo|inf|None)\]"),
    "fix": r"(?i)suggested fix|\bfix(es)?\b|replace it with|\bto fix\b",
}


def error_checklist(message: str, names=()) -> dict[str, bool]:
    """What an error message tells the user: the input dim, a source line, the offending value, a fix."""
    found = {k: re.search(p, message) is not None for k, p in _PATTERNS.items()}
    if not found["input_dim"]:
        found["input_dim"] = any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", message) for n in names if n)
    return found


def error_drop_in(torch_error: BaseException, ours: BaseException, spec) -> list[tuple[str, str]]:
    """Where code written for torch.export's error breaks on shapeproof's: an ``except`` of torch's
    class, and torch's ``refine_dynamic_shapes_from_suggested_fixes`` on the message (where it reads
    torch's own)."""
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    found = []
    if not isinstance(ours, type(torch_error)):
        found.append(("other_error_class", f"torch raises {type(torch_error).__name__}, shapeproof "
                                           f"{type(ours).__name__}: {first_line(ours)}"))
    try:
        refine_dynamic_shapes_from_suggested_fixes(getattr(torch_error, "msg", str(torch_error)), spec)
    except Exception:  # noqa: BLE001 - torch's message has no fix it can read: nothing to compare
        return found
    try:
        refine_dynamic_shapes_from_suggested_fixes(getattr(ours, "msg", str(ours)), spec)
    except Exception as exc:  # noqa: BLE001 - what a caller's refine loop would meet
        found.append(("unrefinable", f"torch's refine_dynamic_shapes_from_suggested_fixes reads torch's "
                                     f"message, not shapeproof's: {type(exc).__name__}: {first_line(exc)}"))
    return found


def spec_names(model, args, kwargs, spec) -> set[str]:
    """Argument names and the names of the Dims in ``spec``: how a message can point at an input dim."""
    import inspect

    import torch.utils._pytree as pytree
    from torch.export import ShapesCollection

    names = set(inspect.signature(model.forward).parameters)
    if isinstance(spec, ShapesCollection):
        spec = spec.dynamic_shapes(model, args, kwargs)
    if isinstance(spec, (dict, list, tuple)):
        for leaf in pytree.tree_leaves(spec, is_leaf=lambda x: isinstance(x, type)):
            if isinstance(leaf, type):
                names.add(leaf.__name__)
    return names


# ---------------------------------------------------------------------------------------------- one case

def run_case(case, level: str = "full") -> dict:
    """Export ``case`` both ways and compare; a row of plain data with its ``problems``."""
    row = {"case": case.name, "group": case.group, "source": case.source}
    outcomes = {e: export_with(e, case) for e in EXPORTERS}
    for e, outcome in outcomes.items():
        row[e] = outcome.summary()
    model, args, kwargs, spec = case.build()
    layout = Layout.of(model, args, kwargs)
    row["problems"] = problems = []

    if all(o.error is not None for o in outcomes.values()):
        names = spec_names(model, args, kwargs, spec)
        row["checklist"] = {e: error_checklist(str(o.error), names) for e, o in outcomes.items()}
        missing = [k for k in CHECKLIST if row["checklist"]["torch"][k]
                   and not row["checklist"]["shapeproof"][k]]
        if missing:
            sp = row["shapeproof"]
            problems.append(("less_informative",
                             f"lacks {', '.join(missing)}: {sp['error_type']}: {sp['error']}"))
        problems += error_drop_in(outcomes["torch"].error, outcomes["shapeproof"].error, spec)
    if outcomes["torch"].error is None and outcomes["shapeproof"].error is not None:
        problems.append(("torch_only", f"{row['shapeproof']['error_type']}: {row['shapeproof']['error']}"))
    if outcomes["shapeproof"].error is None and outcomes["torch"].error is not None:
        problems.append(("shapeproof_only", f"torch: {row['torch']['error_type']}: {row['torch']['error']}"))

    programs = {}
    for e, o in outcomes.items():
        if o.error is None:
            dims = program_dims(o.program, layout)
            if dims is None:
                problems.append(("harness", f"cannot map {e}'s placeholders to the inputs"))
                continue
            programs[e] = (dims, dict(o.program.range_constraints))
    ranges = {e: {slot: slot_range(dims[slot], rc) for slot in layout.slots}
              for e, (dims, rc) in programs.items()}
    if len(programs) == 2:
        row["ranges"] = {layout.slot_name(slot): [ranges[e][slot] for e in EXPORTERS]
                         for slot in layout.slots}
        for slot in layout.slots:
            rt, rs = (ranges[e][slot] for e in EXPORTERS)
            if rt is not None and rs is not None and not contains(rs, rt):
                problems.append(("narrower_range",
                                 f"{layout.slot_name(slot)}: torch {_fmt(rt)}, shapeproof {_fmt(rs)}"))

    row["probes"] = []
    if programs:
        points = [(layout.inputs(sizes, dict(values), seed=k), sizes) for k, (sizes, values)
                  in enumerate(probes(layout, programs, level))]
        points += [(inputs, "case probe") for inputs in case.extra_probes()]
        for inputs, sizes in points:
            row["probes"].append(_probe(model, outcomes, ranges, inputs, sizes, layout, problems))
    row["problems"] = [list(p) for p in problems]
    return row


def _probe(model, outcomes, ranges, inputs, sizes, layout, problems) -> dict:
    where = sizes if isinstance(sizes, str) else _shape_text(layout, sizes)
    status, expected = call(copy.deepcopy(model), inputs)
    entry = {"at": where, "eager": "ok" if status == "ok" else expected}
    mismatched = set()
    for e in ranges:
        got_status, got = call(_private_module(outcomes[e].program), inputs)
        if got_status != "ok":
            entry[e] = got
            continue
        entry[e] = "ok"
        why = f"eager raises {expected}" if status != "ok" else differs(got, expected)
        if why:
            mismatched.add(e)
            # torch's own program differs from eager there too (eager broadcasts what the graph's
            # decomposition does not, eager raises where the kernel does not): not shapeproof's doing
            kind = ("torch_eager_mismatch" if e == "torch" else
                    "shared_eager_mismatch" if "torch" in mismatched else "eager_mismatch")
            problems.append((kind, f"{e}'s program at {where}: {why}"))
    if entry.get("torch") == "ok" and "shapeproof" in entry and entry["shapeproof"] != "ok":
        problems.append(("narrower_acceptance",
                         f"at {where} torch's program runs, shapeproof's: {entry['shapeproof']}"))
    # without torch's program to compare with: a guard that rejects valid inputs inside the program's own
    # ranges must at least be reported (docs/pages/guide/bench.md: every kept guard is decided or reported)
    sp = outcomes["shapeproof"]
    if ("torch" not in ranges and "shapeproof" in ranges and status == "ok" and entry["shapeproof"] != "ok"
            and not isinstance(sizes, str) and not sp.warnings
            and _inside(ranges["shapeproof"], layout, sizes)):
        problems.append(("silent_narrowing",
                         (f"at {where} eager runs, inside shapeproof's ranges, its program: "
                                              f"{entry['shapeproof']}, and the export warned nothing")))
    return entry


def _inside(slot_ranges: dict, layout, sizes) -> bool:
    return all(rng is not None and contains(rng, (size, size))
               for rng, size in zip((slot_ranges[s] for s in layout.slots), sizes))


def _private_module(program):
    """``program.module()`` with buffers of its own: ``module()`` shares the program's, which a call may
    mutate."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return copy.deepcopy(program.module())


def _shape_text(layout, sizes) -> str:
    parts: dict[int, list] = {}
    for (leaf, dim), size in zip(layout.slots, sizes):
        parts.setdefault(leaf, []).append(str(size) if dim is not None else f"={size}")
    return ", ".join(layout.names[leaf] + (v[0] if v[0].startswith("=") else f"[{'x'.join(v)}]")
                     for leaf, v in parts.items())


def _fmt(rng) -> str:
    lo, hi = rng
    return f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"


# ---------------------------------------------------------------------------------------------- driver

def _warm_up() -> None:
    """One tiny export with each exporter, so that neither pays the other's lazy initialization in the
    timings."""
    import torch

    class Tiny(torch.nn.Module):
        def forward(self, x):
            return x * 2

    case = type("Warm", (),
                {"build": lambda self: (Tiny(), (torch.randn(3),), {}, ({0: torch.export.Dim("n")},)),
                             "context": lambda self: contextlib.nullcontext()})()
    for exporter in EXPORTERS:
        export_with(exporter, case)


def _worker(name: str, level: str, conn) -> None:
    logging.getLogger("torch").setLevel(logging.CRITICAL)   # torch logs the errors a failed export raises
    _warm_up()
    try:
        row = run_case(load_cases()[name], level)
    except BaseException:  # noqa: BLE001 - a harness failure is reported as a row
        case = load_cases().get(name)
        row = {"case": name, "group": getattr(case, "group", "?"), "source": getattr(case, "source", ""),
               "problems": [["harness", traceback.format_exc(limit=-3).strip().splitlines()[-1][:300]]]}
    conn.send(row)
    conn.close()


def run_isolated(name: str, group: str, level: str, timeout: float, ctx) -> dict:
    """``run_case`` in a process of its own; a timeout row when it does not answer in time."""
    receive, send = ctx.Pipe(duplex=False)
    start = time.perf_counter()
    process = ctx.Process(target=_worker, args=(name, level, send), daemon=True)
    process.start()
    send.close()
    row = None
    if receive.poll(timeout):
        try:
            row = receive.recv()
        except EOFError:
            row = None
    process.join(5)
    if process.is_alive():
        process.kill()
        process.join()
    if row is None:
        why = ("timeout" if time.perf_counter() - start >= timeout
               else f"harness (exit code {process.exitcode})")
        row = {"case": name, "group": group, "source": "", "problems": [[why.split()[0], why]]}
    row["wall_seconds"] = round(time.perf_counter() - start, 2)
    return row


def table(rows: list[dict]) -> str:
    """Counts per group, then one line per problem case."""
    def kinds(r):
        return {k for k, _ in r.get("problems", [])}

    def exported(r, e):
        return (r.get(e) or {}).get("status") == "exported"

    columns = [
        ("cases", lambda r: True),
        ("torch exports", lambda r: exported(r, "torch")),
        ("shapeproof exports", lambda r: exported(r, "shapeproof")),
        ("torch-only", lambda r: "torch_only" in kinds(r)),
        ("shapeproof-only", lambda r: "shapeproof_only" in kinds(r)),
        ("narrower range/acceptance", lambda r: bool(kinds(r) & {"narrower_range", "narrower_acceptance"})),
        ("eager mismatches", lambda r: "eager_mismatch" in kinds(r)),
        ("errors less informative", lambda r: "less_informative" in kinds(r)),
        ("errors torch's callers cannot handle",
         lambda r: bool(kinds(r) & {"other_error_class", "unrefinable"})),
        ("timeouts/harness", lambda r: bool(kinds(r) & {"timeout", "harness"})),
        ("silent narrowing", lambda r: "silent_narrowing" in kinds(r)),
        ("torch's own eager mismatches", lambda r: "torch_eager_mismatch" in kinds(r)),
    ]
    groups = sorted({r["group"] for r in rows})
    lines = ["| group | " + " | ".join(c for c, _ in columns) + " |", "|---|" + "---|" * len(columns)]
    for g in groups + ["all"]:
        rs = [r for r in rows if g in ("all", r["group"])]
        cells = [str(sum(1 for r in rs if fn(r))) for _, fn in columns]
        label = f"**{g}**" if g == "all" else g
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for title, wanted in (("Problems:", lambda k: k in MUST_BE_ZERO),
                          ("Information:", lambda k: k not in MUST_BE_ZERO)):
        section = []
        for r in sorted(rows, key=lambda r: (r["group"], r["case"])):
            shown = [(k, d) for k, d in r.get("problems", []) if wanted(k)]
            for kind in dict.fromkeys(k for k, _ in shown):
                details = [d for k, d in shown if k == kind]
                more = f" (+{len(details) - 1} more)" if len(details) > 1 else ""
                section.append(f"- {r['case']}: {kind}: {details[0][:240]}{more}")
        lines += [title, *(section or ["- none"]), ""]
    for status in ("exported", "failed"):
        medians = []
        for e in EXPORTERS:
            times = sorted((r.get(e) or {}).get("seconds", 0) for r in rows
                           if (r.get(e) or {}).get("status") == status)
            medians.append(f"{e} {times[len(times) // 2]:.2f} s (max {times[-1]:.2f}, n={len(times)})"
                           if times
                           else f"{e} -")
        label = "exports that succeed" if status == "exported" else "exports that fail"
        lines.append(f"median export time, {label}: " + ", ".join(medians))
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict], path: Path) -> None:
    fields = ["case", "group", "source", "torch_status", "torch_error", "torch_seconds", "shapeproof_status",
              "shapeproof_error", "shapeproof_seconds", "probes", "torch_accepts", "shapeproof_accepts",
              "problem_kinds", "problems", "wall_seconds"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            out = {"case": r["case"], "group": r["group"], "source": r.get("source", ""),
                   "probes": len(r.get("probes", [])), "wall_seconds": r.get("wall_seconds")}
            for e in EXPORTERS:
                s = r.get(e) or {}
                out[f"{e}_status"] = s.get("status", "-")
                out[f"{e}_error"] = f"{s['error_type']}: {s['error']}" if s.get("error_type") else ""
                out[f"{e}_seconds"] = s.get("seconds")
                if e in ("torch", "shapeproof"):
                    out[f"{e}_accepts"] = sum(1 for p in r.get("probes", []) if p.get(e) == "ok")
            out["problem_kinds"] = " ".join(sorted({k for k, _ in r.get("problems", [])}))
            out["problems"] = " | ".join(f"{k}: {d}" for k, d in r.get("problems", []))[:4000]
            writer.writerow(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--group", default="")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per case (default 120)")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="cases at a time (default 1: one heavy process)")
    parser.add_argument("--probes", choices=("full", "quick"), default="full")
    args = parser.parse_args(argv)

    cases = load_cases()
    names = [n for n, c in cases.items() if args.only in n and (not args.group or c.group == args.group)]
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.export", "torch._dynamo", "shapeproof.export",
                                REGISTRY_MODULE])

    def describe(row: dict) -> str:
        status = " / ".join((row.get(e) or {}).get("status", "-") for e in EXPORTERS)
        bad = sorted({kind for kind, _ in row.get("problems", []) if kind in MUST_BE_ZERO})
        return f"{row['case']}: {status} {row.get('wall_seconds', 0):.1f}s {' '.join(bad)}"

    start = time.perf_counter()
    # local only: the jobs share this process's forkserver context
    rows = run_jobs(run_isolated, [(n, cases[n].group, args.probes, args.timeout, ctx) for n in names],
                    workers=args.jobs, describe=describe, desc="cases")
    print(table(rows))
    print(f"{len(rows)} cases in {time.perf_counter() - start:.0f} s")
    if args.csv:
        write_csv(rows, args.csv)
    return 1 if any(k in MUST_BE_ZERO for r in rows for k, _ in r.get("problems", [])) else 0


if __name__ == "__main__":
    raise SystemExit(main())
