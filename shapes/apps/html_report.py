"""One export's shape decisions as a self-contained HTML page (``shapeproof.export.html`` writes it).

The page has to open wherever a CI artifact or a mail attachment does, offline
and with scripts blocked: inline CSS, dependency graphs as inline SVG laid out
here in Python (no graphviz), no external URLs, no JavaScript (folding uses
``<details>``).  Everything shown comes from user code or user names (source
lines, Dim names, input paths, the title), so the markup lives in Jinja
templates (``templates/``) rendered with autoescaping: every value is escaped
unless this module marks it safe, and it marks only the SVG it rendered from
its own template.  Failed guards come first and unfolded: they are why the
page was opened.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

import jinja2
import networkx as nx
from markupsafe import Markup

from shapeproof.shapes import Explanation, GuardReport, specialization_lines

__all__ = ["dependency_svg", "render_html"]

_STATUS_ORDER = {"refuted": 0, "unknown": 1, "warning": 2, "not checked": 3, "proven": 4}
_BADGE = {"refuted": "refuted", "unknown": "unknown", "not checked": "run time", "warning": "0/1 warning",
          "proven": "proven"}


def _span(r) -> str:
    lo, hi = r
    return f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"


_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("shapeproof.shapes.apps", "templates"),
                                autoescape=True, trim_blocks=True, lstrip_blocks=True)
_TEMPLATES.filters.update(span=_span, basename=os.path.basename, clamp01=lambda x: max(0.0, min(x, 1.0)))


@dataclass
class _Card:
    """One guard or runtime assert as the page shows it."""

    node: tuple                  # its node in the dependency graph: ("guard", i) or ("assert", i)
    explanation: Explanation
    status: str                  # a key of _STATUS_ORDER
    ms: float | None
    strategy: str | None
    warning: dict | None = None  # a 0/1 counterexample for guards that hold only from size 2 up


def _cards(env, report: GuardReport) -> list[_Card]:
    violations = {v.guard.index: v for v in report.violations}
    zero_one = {w.guard.index: w.counterexample for w in report.zero_one}
    cards = []
    for guard in report.guards:
        ex = env.explain(violations.get(guard.index, guard))
        verdict = guard.verdict
        status = "warning" if guard.index in zero_one else ex.status
        cards.append(_Card(("guard", guard.index), ex, status, verdict.milliseconds if verdict else None,
                           verdict.strategy if verdict else None, zero_one.get(guard.index)))
    for ra in env.runtime_asserts:
        cards.append(_Card(("assert", ra.index), env.explain(ra), "not checked", None, None))
    return sorted(cards, key=lambda c: (_STATUS_ORDER.get(c.status, 2), c.node))


# ------------------------------------------------------------------ dependency graph (inline SVG)
_CHAR_W, _NODE_H, _GAP_X, _GAP_Y, _PAD = 7.2, 38, 46, 12, 6


def _layers(sub: nx.DiGraph, target) -> list[list]:
    """Columns left to right (input dims first, the condition last), ordered to limit crossings."""
    if nx.is_directed_acyclic_graph(sub):
        layers = [sorted(gen, key=str) for gen in nx.topological_generations(sub)]
    else:   # substitutions never form cycles, but a page must not fail on one: lay out by distance
        dist = nx.shortest_path_length(sub.reverse(copy=False), target)
        depth = max(dist.values())
        layers = [sorted((n for n, d in dist.items() if depth - d == i), key=str) for i in range(depth + 1)]
    for i in range(1, len(layers)):
        pos = {n: k for layer in layers[:i] for k, n in enumerate(layer)}
        def centre(n, pos=pos):
            preds = [pos[p] for p in sub.predecessors(n) if p in pos]
            return sum(preds) / len(preds) if preds else 0.0
        layers[i].sort(key=centre)
    return layers


def _node_text(env, node, verdict: str) -> tuple[str, str, str]:
    """Two lines of text and a CSS class for a node of the dependency graph."""
    kind, name = node
    if kind == "input":
        info = next((i for i in env.symbols.values() if any(s.path == name for s in i.sources)), None)
        return name, "input dim" + (f", example {info.hint}" if info and info.hint is not None else ""), "in"
    if kind == "symbol":
        info = next((i for i in env.symbols.values() if i.name == name), None)
        if info is None:
            return name, "", "sym"
        lo, hi = info.declared
        span = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        head = info.label if info.label == name else f"{info.label}  ({name})"
        return head, f"in {span}", "sym"
    return f"{kind} #{name}", _BADGE.get(verdict, verdict), f"t-{verdict.replace(' ', '-').replace('/', '')}"


def dependency_svg(env, target, verdict: str = "proven") -> str:
    """Input dims -> symbols -> the condition ``target`` (a node of ``env.graph``), as inline SVG."""
    g = env.graph.g
    if target not in g:
        return ""
    sub = g.subgraph(nx.ancestors(g, target) | {target})
    layers = _layers(sub, target)
    text = {n: _node_text(env, n, verdict) for n in sub}
    widths = [max(max(len(text[n][0]), len(text[n][1])) * _CHAR_W + 20 for n in layer) for layer in layers]
    rows = max(len(layer) for layer in layers)
    height = rows * (_NODE_H + _GAP_Y) - _GAP_Y + 2 * _PAD
    box: dict = {}
    x: float = _PAD
    for layer, w in zip(layers, widths):
        top = (height - (len(layer) * (_NODE_H + _GAP_Y) - _GAP_Y)) / 2
        for k, n in enumerate(layer):
            box[n] = (x, top + k * (_NODE_H + _GAP_Y), w)
        x += w + _GAP_X
    width = x - _GAP_X + _PAD
    edges = []
    for a, b in sub.edges:
        (xa, ya, wa), (xb, yb, _) = box[a], box[b]
        x1, y1, x2, y2 = xa + wa, ya + _NODE_H / 2, xb - 2, yb + _NODE_H / 2
        bend = (x2 - x1) / 2
        edges.append(f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} "
                     f"{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}")
    nodes = [dict(x=f"{bx:.1f}", y=f"{by:.1f}", w=f"{w:.1f}", h=_NODE_H, tx=f"{bx + 10:.1f}",
                  ty1=f"{by + 16:.1f}", ty2=f"{by + 30:.1f}", head=text[n][0], sub=text[n][1], cls=text[n][2])
             for n, (bx, by, w) in box.items()]
    return _TEMPLATES.get_template("graph.svg.j2").render(
        width=f"{width:.0f}", height=f"{height:.0f}", target=target, marker=f"arrow-{target[0]}-{target[1]}",
        inputs=", ".join(n[1] for n in sub if n[0] == "input") or "no input dim", edges=edges, nodes=nodes)


# ------------------------------------------------------------------ page sections
def _by(counter: Counter) -> str:
    return ", ".join(f"{name} {n}" for name, n in counter.most_common()) or "none"


def _tiles(report: GuardReport, env, discharged) -> list[tuple[str, int, str]]:
    """(label, count, CSS class) of the header's tiles."""
    status = Counter(g.verdict.status.value if g.verdict else "not checked" for g in report.guards)
    refuted, unknown, proven = status["refuted"], status["unknown"], status["proven"]
    kept = sum(1 for g in report.kept_guards if not (g.verdict and g.verdict.refuted))
    return [("guards", len(report.guards), ""), ("refuted", refuted, "bad" if refuted else ""),
            ("unknown", unknown, "warn" if unknown else ""), ("proven", proven, "ok" if proven else ""),
            ("kept as input checks", kept, ""), ("runtime asserts", len(env.runtime_asserts), ""),
            ("discharged by the engine", len(discharged), "ok" if discharged else "")]


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def _card_view(env, card: _Card) -> dict:
    """What the template shows of one card, beyond its explanation."""
    ex = card.explanation
    decided = (f"{card.strategy} in {_ms(card.ms)}" if card.ms is not None
               else "checked by the program at run time" if ex.kind == "runtime assert" else "not decided")
    return dict(node=card.node, explanation=ex, key=card.status.replace(" ", "-").replace("/", ""),
                badge=_BADGE.get(card.status, card.status), decided=decided,
                open=card.status in ("refuted", "unknown", "warning"),
                svg=Markup(dependency_svg(env, card.node, card.status)),    # escaped by graph.svg.j2
                warning=", ".join(f"{k} = {v}" for k, v in card.warning.items()) if card.warning else "")


_EXAMPLE_CHARS = 160


def _discharged(env, queries) -> list[dict]:
    """Questions torch left open that the engine proved, grouped by source line, then op (as the CLI does)."""
    groups: dict[tuple, dict] = {}
    for q in queries:
        frame = q.where.frame if q.where is not None else None
        line = (f"{os.path.basename(frame.filename)}:{frame.lineno}", frame.code, frame.filename) if frame \
            else ("(torch internals)", "", "")
        groups.setdefault(line, {}).setdefault(q.where.op if q.where is not None else None, []).append(q)
    lines = []
    for (place, code, filename), ops in groups.items():
        rows = []
        for op, items in ops.items():
            example = min((env.render(q.goal) for q in items), key=len)
            shown = example if len(example) <= _EXAMPLE_CHARS else example[:_EXAMPLE_CHARS - 3] + "..."
            rows.append(dict(op=op, count=len(items), time=_ms(sum(q.seconds for q in items) * 1000),
                             strategies=_by(Counter(q.strategy for q in items)), example=example,
                             shown=shown))
        lines.append(dict(place=place, code=code, filename=filename, ops=rows))
    return lines


def render_html(env, report: GuardReport, *, title: str, model: str = "", exported: bool,
                seconds: float | None = None, program: str | None = None, failure: str | None = None,
                notes=()) -> str:
    """The whole page for the shape environment ``env`` of one export and its ``produce_guards`` report.

    ``program`` is a text summary of the exported program (shown when given);
    ``failure`` the text of the error torch raised, if any; ``notes`` what the
    export wants the reader to know (specializations, regions, input checks).
    """
    discharged = env.discharged
    cards = _cards(env, report)
    took = "" if seconds is None else f" {'in' if exported else 'after'} {seconds:.2f} s"
    return _TEMPLATES.get_template("report.html.j2").render(
        title=title, model=model, exported=exported, took=took, tiles=_tiles(report, env, discharged),
        guard_strategies=_by(Counter(g.verdict.strategy for g in report.guards if g.verdict)),
        discharged_strategies=_by(Counter(q.strategy for q in discharged)),
        combined_fixes=report.combined_fixes or [], specialized=specialization_lines(report.specialized),
        failure=failure,
        notes=list(notes), cards=[_card_view(env, c) for c in cards],
        failed=sum(1 for c in cards if c.status == "refuted"), discharged=_discharged(env, discharged),
        discharged_count=len(discharged), program=program)
