"""Does the program of trace A compute trace B's function on B's region?  Proven, or not claimed.

A ``pad`` branch traced on both sides gives two graphs; on the side where no
padding is needed, the padding graph's pads add zeros and its slices keep
everything, so its program serves that side too.  ``serves(a, b)`` decides
this for two traces:

1. every guard of A that B's example satisfies holds on B's whole region
   (the guards B's example violates are the ones *separating* A from B);
2. both graphs, rewritten under B's region by the exact identities of
   ``identities.py`` and with dead code dropped, are the same graph: the same
   ops in the same order on the same inputs, with every integer argument and
   every shape proven equal over B's region, and the same dtypes.

Integer arguments are read from the graph's own arithmetic (``ProgramTerms``),
so they are what the program computes at run time; a value with no such
reading (one ``item`` reads from a buffer) is compared by how it is computed:
the same function of arguments that agree.  Shapes come from torch's
metadata; B's hold on B's region (that is what B's trace established), and
A's are proven equal to B's node by node, which makes them exact there too.
Identities that copy (``pad``, ``contiguous``...) are only used where the
input is contiguous on B's region and no in-place op of its graph writes to
memory the copy or its input may share (see ``identities.py``).  Everything
is decided by ``solver.prove`` with B's region as the fact; an undecided
question means no merge.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import torch
from shapeproof import solver as F      # the solver's facade: conditions and questions
from shapeproof.solver import DEFAULT_TIMEOUT, prove, symbol, truth
from shapeproof.solver import floats as FL
from shapeproof.tracer.torch_internals import UNSAFE_VIEW, HigherOrderOperator, OpOverload, op_schema
from sympy import Integer

from .identities import RULES, OpView, arguments
from .program_terms import ProgramTerms, Unreadable, is_sym_node, is_tensor_node
from ..progress import point_str

__all__ = ["Merge", "serves", "could_unify", "copies_written"]

# one proof per merge attempt carries every obligation at once (and unions of
# guard conjunctions as facts), so it gets the time of a coverage question
MERGE_TIMEOUT = 30.0
_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


@dataclass
class Merge:
    """The answer to "does A's program serve B's region?"; ``reason`` says why not."""

    ok: bool
    reason: str = ""
    seconds: float = 0.0


class _Mismatch(Exception):
    """The graphs differ; ``node`` is the serving program's op where they do, if it has one."""

    def __init__(self, message: str, node=None):
        super().__init__(message)
        self.node = node


# ---------------------------------------------------------------------------- one graph, normalized

@dataclass
class _Normal:
    """A graph with identities removed and dead ops dropped: positions instead of names."""

    keys: list = field(default_factory=list)       # structural key per kept op (refs are positions)
    syms: list = field(default_factory=list)       # integer/boolean arguments of each kept op, in order
    nodes: list = field(default_factory=list)      # the FX node behind each kept op
    inputs: list = field(default_factory=list)     # placeholders
    output: tuple = ()
    chains: list = field(default_factory=list)     # (removed node, its source node): same shape
    copies: dict = field(default_factory=dict)     # ("copy", op, ref) -> the removed copy node


def _written(graph: torch.fx.Graph) -> set:
    """The nodes whose memory an op of ``graph`` may write in place.

    The arguments an op's schema marks as written, and every node that may
    share memory with one of them: ops whose schema says they return an
    alias of an argument (views, ``contiguous``, in-place ops) join it, as
    do ``_unsafe_view`` and anything that is not an ATen op (``getitem``); a
    higher-order op (``cond``) may write any of its inputs.
    Removing a copy is exact in values unless a write reaches it or its input.
    """
    parent: dict = {}

    def find(n):
        while parent.get(n, n) is not n:
            n = parent[n]
        return n

    writes = []
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if isinstance(node.target, HigherOrderOperator):
            writes += node.all_input_nodes       # its subgraphs are not read here: all written
            shared = node.all_input_nodes
        elif not isinstance(node.target, OpOverload) or node.target is UNSAFE_VIEW:
            shared = node.all_input_nodes
        else:
            schema, given = op_schema(node.target), arguments(node)
            annotated = [a for a in schema.arguments if a.alias_info is not None]
            writes += [n for a in annotated if a.alias_info.is_write for n in _nodes_in(given.get(a.name))]
            aliasing = any(r.alias_info is not None for r in schema.returns)
            shared = [n for a in annotated for n in _nodes_in(given.get(a.name))] if aliasing else []
        for other in shared:
            parent[find(other)] = find(node)
    written = {find(n) for n in writes}
    return {n for n in graph.nodes if find(n) in written}


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def copies_written(graph: torch.fx.Graph, merged) -> frozenset:
    """The branches merged while tracing (``MergedSite``s) whose body made a copy that shares memory with
    an in-place write of ``graph``: where the body is skipped, that write would reach the copy's input.

    A copy is found by its node's stack trace, which names the body's source line.
    """
    written = _written(graph)
    found = set()
    for node in graph.nodes:
        rule = RULES.get(node.target) if node.op == "call_function" else None
        if rule is None or not rule.copies or not _shares_a_write(node, written):
            continue
        frames = [(m.group("file"), int(m.group("line")))
                  for m in _FRAME.finditer(node.meta.get("stack_trace") or "")]
        found |= {site.key for site in merged for file, line in frames
                  if file == site.filename and site.body_lines[0] <= line <= site.body_lines[1]}
    return frozenset(found)


def _nodes_in(value) -> list:
    if isinstance(value, torch.fx.Node):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _nodes_in(v)]
    return []


def _shares_a_write(node: torch.fx.Node, written: set) -> bool:
    return node in written or any(n in written for n in node.all_input_nodes)


def _candidates(terms: ProgramTerms, point: dict, written: set) -> dict:
    """Rewrites whose condition holds at ``point`` (to be proven over the region before use); no copy is
    removed that shares memory with an in-place write."""
    env = {symbol(k): v for k, v in point.items()}

    def at_point(f: F.Formula) -> bool:
        return truth(f, env) is True

    found = {}
    for node in terms.program.graph.nodes:
        rule = RULES.get(node.target) if node.op == "call_function" else None
        if rule is None or (rule.copies and _shares_a_write(node, written)):
            continue
        try:
            rewrite = rule.apply(OpView(node, terms, at_point))
        except Unreadable:
            continue
        if rewrite is not None and at_point(rewrite.condition):
            found[node] = (rule, rewrite)
    return found


class _Normalizer:
    """Builds the ``_Normal`` of one program: identities applied, ops keyed by position, dead ops dropped.

    A tensor is referred to as ``("in", i)`` (placeholder), ``("op", j)`` (kept op) or
    ``("copy", op, ref)``: a removed copy has its source's values but maybe not its layout,
    so a consumer reading it is told apart from one reading the source (see ``_match``).
    """

    def __init__(self, terms: ProgramTerms, accepted: dict):
        self.terms, self.accepted = terms, accepted
        self.out = _Normal()
        self.refs: dict = {}
        self.entries: list = []            # (key, syms, node, uses, side effect) per op, before DCE
        self.roots: set = set()
        self._reads: dict = {}

    def run(self) -> _Normal:
        for node in self.terms.program.graph.nodes:
            if node.op == "placeholder":
                self.refs[node] = ("in", len(self.out.inputs))
                self.out.inputs.append(node)
            elif node.op == "output":
                syms: list = []
                self.out.output = self.encode(node.args, syms, self.roots)
                if syms:
                    raise Unreadable("symbolic outputs")
            elif node.op != "call_function":       # get_attr: a subgraph of a control-flow op
                raise Unreadable(f"{node.op} node {node.name}")
            elif not is_sym_node(node):
                self.op(node)
        return self.drop_dead()

    def op(self, node) -> None:
        rule, rewrite = self.accepted.get(node, (None, None))
        if rewrite is not None and rewrite.inputs is None:
            source = self.refs[rewrite.source]
            self.refs[node] = ("copy", str(node.target), source) if rule.copies else source
            self.out.chains.append((node, rewrite.source))
            if rule.copies:
                self.out.copies[self.refs[node]] = node
            return
        syms: list = []
        uses: set = set()
        args = _arguments(node, rewrite.inputs if rewrite is not None else None)
        key = (str(node.target), self.encode(args, syms, uses), _dtypes(node))
        side_effect = not isinstance(node.meta.get("val"), (torch.Tensor, list, tuple)) or (
            isinstance(node.target, OpOverload) and op_schema(node.target).is_mutable)
        self.refs[node] = ("op", len(self.entries))
        self.entries.append((key, syms, node, uses, side_effect))

    def encode(self, arg, syms: list, uses: set):
        """A structural key for an argument; integers go to ``syms`` (compared as terms, not as keys)."""
        if isinstance(arg, torch.fx.Node):
            if arg in self.refs:
                uses.add(_base(self.refs[arg]))
                return ("ref", self.refs[arg])
            if is_sym_node(arg):
                try:
                    syms.append(self.terms.value(arg))
                except Unreadable:
                    ref = self.opaque(arg)
                    uses.add(ref)
                    return ("ref", ref)
                uses.update(self.tensor_reads(arg))
                return ("sym",)
            raise Unreadable(f"argument {arg.format_node()}")
        if isinstance(arg, int) and not isinstance(arg, bool):   # a size may be a constant in one trace only
            syms.append(Integer(arg))
            return ("sym",)
        if isinstance(arg, (list, tuple)):
            return ("list", tuple(self.encode(a, syms, uses) for a in arg))
        if isinstance(arg, dict):
            return ("dict", tuple((k, self.encode(v, syms, uses)) for k, v in sorted(arg.items())))
        if isinstance(arg, _CONSTANTS):
            return ("const", type(arg).__name__, repr(arg))
        raise Unreadable(f"constant {arg!r}")

    def opaque(self, node) -> tuple:
        """A symbolic value with no exact term (read from a tensor's data by ``item``, or computed from
        such a value) is kept as an op of its own: two programs agree on it when they compute it by the
        same function from arguments that agree, whatever its value."""
        if node not in self.refs:
            syms: list = []
            uses: set = set()
            key = (str(node.target), self.encode(_arguments(node, None), syms, uses), _dtypes(node))
            self.refs[node] = ("op", len(self.entries))
            self.entries.append((key, syms, node, uses, False))
        return self.refs[node]

    def tensor_reads(self, node) -> set:
        """The tensors whose shapes a symbolic value reads (they must stay, and be compared)."""
        if node not in self._reads:
            found = set()
            for arg in node.all_input_nodes:
                if arg in self.refs:
                    found.add(_base(self.refs[arg]))
                elif is_sym_node(arg):
                    found |= self.tensor_reads(arg)
            self._reads[node] = found
        return self._reads[node]

    def drop_dead(self) -> _Normal:
        """Keep the ops the outputs or a side effect need, renumbered in order."""
        out, entries = self.out, self.entries
        live = set(self.roots) | {("op", j) for j, e in enumerate(entries) if e[4]}
        for j in range(len(entries) - 1, -1, -1):
            if ("op", j) in live:
                live |= entries[j][3]
        position = {}
        for j, (key, syms, node, _, _) in enumerate(entries):
            if ("op", j) in live:
                position[("op", j)] = ("op", len(out.keys))
                out.keys.append(key)
                out.syms.append(syms)
                out.nodes.append(node)

        def ref(r):
            return ("copy", r[1], ref(r[2])) if r[0] == "copy" else position.get(r, r)

        def renumber(key):
            if _is_ref(key):
                return ("ref", ref(key[1]))
            return tuple(renumber(k) for k in key) if isinstance(key, tuple) else key

        out.keys = [renumber(k) for k in out.keys]
        out.output = renumber(out.output)
        out.copies = {ref(r): n for r, n in out.copies.items()}
        return out


def _normalize(terms: ProgramTerms, accepted: dict) -> _Normal:
    """``terms.program`` with the ``accepted`` rewrites applied and dead ops dropped."""
    return _Normalizer(terms, accepted).run()


def _base(ref):
    while ref[0] == "copy":
        ref = ref[2]
    return ref


def _layers(ref) -> list:
    """``ref`` and the refs it copies, innermost (the base) first."""
    found = [ref]
    while ref[0] == "copy":
        ref = ref[2]
        found.append(ref)
    return found[::-1]


def _arguments(node, overrides: dict | None) -> tuple:
    """An op's arguments in schema order with defaults filled in (positional or keyword, the same key)."""
    if not isinstance(node.target, OpOverload):
        return (node.args, node.kwargs)
    values = {**arguments(node), **(overrides or {})}
    return tuple(values.values())


def _dtypes(node) -> tuple:
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return tuple(str(v.dtype) if isinstance(v, torch.Tensor) else type(v).__name__ for v in vals)


def _op(node) -> str:
    """An op's name for reasons: ``aten.pad.default``, ``add``, ``sym_ite``."""
    target = node.target
    return str(target) if isinstance(target, OpOverload) else getattr(target, "__name__", str(target))


def _where(node) -> str:
    """The user's source line of an FX node, for reasons."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    if not lines:
        return node.name
    file_part = lines[-1].split('"')
    name = file_part[1].rsplit("/", 1)[-1] if len(file_part) > 1 else lines[-1]
    line = lines[-1].split("line ")[-1].split(",")[0]
    return f"{name}:{line}"


# ---------------------------------------------------------------------------- two graphs

def _shapes(terms: ProgramTerms, node) -> list:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return [terms.shape(node)]
    return []


def _contiguous(terms: ProgramTerms, node) -> F.Formula:
    """Row-major strides wherever a dim has more than one element (torch's ``is_contiguous``)."""
    if not is_tensor_node(node):
        raise Unreadable(f"{node} is not a tensor")
    shape, strides = terms.shape(node), terms.strides(node)
    parts = [F.disj(F.le(size, 1), F.eq(stride, math.prod(shape[d + 1:])))
             for d, (size, stride) in enumerate(zip(shape, strides))]
    return F.disj(F.conj(*parts), F.eq(math.prod(shape), 0))


def _source(ref, normal: _Normal):
    return normal.inputs[ref[1]] if ref[0] == "in" else normal.nodes[ref[1]] if ref[0] == "op" else None


def _equal(a, b) -> F.Formula:
    if isinstance(a, F.Formula) or isinstance(b, F.Formula):
        if not (isinstance(a, F.Formula) and isinstance(b, F.Formula)):
            raise _Mismatch(f"an integer against a condition: {a} vs {b}")
        return F.iff(a, b)
    if FL.is_float(a) or FL.is_float(b):
        if not (FL.is_float(a) and FL.is_float(b)):
            raise _Mismatch(f"an integer against a float: {a} vs {b}")
        return FL.compare_float("==", a, b)
    return F.eq(a, b)


def _is_ref(key) -> bool:
    return isinstance(key, tuple) and len(key) == 2 and key[0] == "ref"


def _match(ka, kb, tb: ProgramTerms, nb: _Normal, obligations: list) -> bool:
    """Structural equality of two keys; a ref read through removed copies on one side only (or through
    different copies) is the same tensor in values, and in layout too if the tensor where the two chains
    of copies part is contiguous (every copy of a contiguous tensor is contiguous)."""
    if _is_ref(ka) and _is_ref(kb):
        la, lb = _layers(ka[1]), _layers(kb[1])
        if la[0] != lb[0]:
            return False
        if la != lb:
            common = next(i for i, (x, y) in enumerate(zip(la + [None], lb + [None])) if x != y) - 1
            parted = lb[common]
            source = nb.copies[parted] if parted[0] == "copy" else _source(parted, nb)
            if source is None:
                return False
            obligations.append(_contiguous(tb, source))
        return True
    if isinstance(ka, tuple) and isinstance(kb, tuple):
        return len(ka) == len(kb) and all(_match(x, y, tb, nb, obligations) for x, y in zip(ka, kb))
    return ka == kb


def _compare(ta: ProgramTerms, na: _Normal, tb: ProgramTerms, nb: _Normal) -> list[F.Formula]:
    """Obligations under which ``na`` and ``nb`` compute the same values; ``_Mismatch`` if they cannot."""
    signatures = [[(s.kind, s.target) for s in t.program.graph_signature.input_specs
                   + t.program.graph_signature.output_specs] for t in (ta, tb)]
    if signatures[0] != signatures[1]:
        raise _Mismatch("different inputs or outputs")
    obligations: list[F.Formula] = []
    for i, (ka, kb) in enumerate(zip(na.keys, nb.keys)):
        if not _match(ka, kb, tb, nb, obligations):
            raise _Mismatch(f"op {i}: {_op(na.nodes[i])} ({_where(na.nodes[i])}) where the other program "
                            f"has {_op(nb.nodes[i])} ({_where(nb.nodes[i])})", na.nodes[i])
    if len(na.keys) != len(nb.keys):
        longer, n = (na, len(nb.keys)) if len(na.keys) > len(nb.keys) else (nb, len(na.keys))
        side = "the serving program" if longer is na else "the served program"
        raise _Mismatch(f"{side} has {_op(longer.nodes[n])} ({_where(longer.nodes[n])}), the other not",
                        longer.nodes[n] if longer is na else None)
    if not _match(na.output, nb.output, tb, nb, obligations):
        raise _Mismatch("different outputs")
    for i, (sa, sb) in enumerate(zip(na.syms, nb.syms)):
        for a, b in zip(sa, sb):
            if isinstance(a, Integer) and isinstance(b, Integer) and a != b:
                raise _Mismatch(f"op {i}: {_op(na.nodes[i])} ({_where(na.nodes[i])}) takes {a} where "
                                f"the other program's takes {b}")
        obligations += [_equal(a, b) for a, b in zip(sa, sb) if a != b]
    for pa, pb in zip(na.inputs + na.nodes, nb.inputs + nb.nodes):
        for shape_a, shape_b in zip(_shapes(ta, pa), _shapes(tb, pb)):
            if len(shape_a) != len(shape_b):
                raise _Mismatch(f"rank differs at {_where(pa)}")
            obligations += [F.eq(x, y) for x, y in zip(shape_a, shape_b) if x != y]
    for removed, source in na.chains:          # A's shape claims along removed identities
        if is_tensor_node(removed):
            obligations += [F.eq(x, y) for x, y in zip(ta.shape(removed), ta.shape(source)) if x != y]
    return list(dict.fromkeys(obligations))


def _provable(conditions: list[F.Formula], box: dict, facts: list, strategy: str, timeout: float,
              quick: float) -> list[bool]:
    """Which ``conditions`` hold over the region: all at once (the usual case), else one by one, quickly."""
    if not conditions:
        return []
    if prove(F.conj(*conditions), ranges=box, facts=facts, strategy=strategy, timeout=timeout).proven:
        return [True] * len(conditions)
    return [prove(c, ranges=box, facts=facts, strategy=strategy, timeout=quick).proven for c in conditions]


def _no_identity(node, terms: ProgramTerms, point: dict, written: set) -> str:
    """Why an op that has an identity rule is not one at ``point`` (a pad of 4 where no padding is needed)."""
    rule = RULES.get(node.target) if node is not None else None
    if rule is None:
        return ""
    if rule.copies and _shares_a_write(node, written):
        return f"; it stays: an op of its graph writes in place to memory this {rule.name} may share"
    env = {symbol(k): v for k, v in point.items()}
    try:
        rewrite = rule.apply(OpView(node, terms, lambda f: truth(f, env) is True))
    except Unreadable:
        return ""
    if rewrite is None:
        return f"; no {rule.name} rule applies to its arguments"
    return f"; it is no identity at {point_str(point)}: {F.formula_str(rewrite.condition)} is false there"


def _failing_part(verdict, guards: list, obligations: list) -> str:
    """The condition of a refused merge that is false at the solver's counterexample, and that point
    (else the solver's reason)."""
    at = verdict.counterexample
    if not at:
        return str(verdict.reason)
    env = {symbol(k): v for k, v in at.items()}
    for kind, conditions in (("the serving program's guard", guards), ("the graphs' agreement", obligations)):
        failing = next((c for c in conditions if truth(c, env) is False), None)
        if failing is not None:
            return f"{kind} {F.formula_str(failing)} is false at {point_str(at)}"
    return f"{verdict.reason} at {point_str(at)}"


def serves(a, b, box: dict, strategy: str = "cascade", timeout: float = MERGE_TIMEOUT,
           quick: float = DEFAULT_TIMEOUT) -> Merge:
    """Whether trace ``a``'s program computes trace ``b``'s function on ``b``'s region (see module doc).

    ``timeout`` bounds the proof of all obligations at once, ``quick`` each
    identity condition proven alone when they do not all hold together.
    """
    start = time.perf_counter()

    def no(reason: str) -> Merge:
        return Merge(False, reason, time.perf_counter() - start)

    if a.program is None or b.program is None or a.region is None or b.region is None:
        return no("a trace without a program or region")
    if a.fingerprint == b.fingerprint:
        return Merge(True, "identical graphs", time.perf_counter() - start)
    point, facts = b.at, [b.region]
    guards = a.region.args if isinstance(a.region, F.And) else (a.region,)
    needed = [g for g in guards if truth(g, point) is not False]      # the rest separate a from b
    try:
        ta, tb = a.terms, b.terms
        written = _written(a.program.graph) | _written(b.program.graph)
        found = {**_candidates(ta, b.point, written), **_candidates(tb, b.point, written)}
        _compare(ta, _normalize(ta, found), tb, _normalize(tb, found))    # cheap: structure at b's example
        nodes = list(found)
        ok = _provable([found[n][1].condition for n in nodes], box, facts, strategy, timeout, quick)
        accepted = {n: found[n] for n, yes in zip(nodes, ok) if yes}
        obligations = _compare(ta, _normalize(ta, accepted), tb, _normalize(tb, accepted))
    except Unreadable as exc:
        return no(f"cannot read a program exactly: {exc}")
    except _Mismatch as exc:
        return no(str(exc) + _no_identity(exc.node, ta, b.point, written))
    goal = F.conj(*needed, *obligations)
    if truth(goal, point) is False:
        failing = next((o for o in needed + obligations if truth(o, point) is False), goal)
        return no(f"fails at its own example: {failing}")
    verdict = prove(goal, ranges=box, facts=facts, strategy=strategy, timeout=timeout)
    if not verdict.proven:
        return no(f"not proven over the region ({verdict.status.value}: "
                  f"{_failing_part(verdict, needed, obligations)})")
    return Merge(True, f"{len(accepted)} identities, {len(obligations)} obligations",
                 time.perf_counter() - start)


def could_unify(a, b) -> bool:
    """Whether some third trace might serve both: the graphs agree once each drops the identities that
    hold at the *other's* example (a pad that is 0 there).  A heuristic for stopping early, never a proof."""
    try:
        ta, tb = a.terms, b.terms
        written = _written(a.program.graph) | _written(b.program.graph)
        na = _normalize(ta, _candidates(ta, b.point, written))
        nb = _normalize(tb, _candidates(tb, a.point, written))
        ignored: list = []
        return len(na.keys) == len(nb.keys) and all(_match(x, y, tb, nb, ignored) for x, y in
                                                    zip(na.keys + [na.output], nb.keys + [nb.output]))
    except (Unreadable, _Mismatch):
        return False
