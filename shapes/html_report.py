"""One export's shape decisions as a self-contained HTML page (``shapeproof.export.html`` writes it).

The page has to open wherever a CI artifact or a mail attachment does, offline
and with scripts blocked: inline CSS, dependency graphs as inline SVG laid out
here in Python (no graphviz), no external URLs, no JavaScript (folding uses
``<details>``).  Everything shown comes from user code or user names (source
lines, Dim names, input paths, the title), so every string goes through
``html.escape``.  Failed guards come first and unfolded: they are why the page
was opened.
"""
from __future__ import annotations

import html
import os
from collections import Counter
from dataclasses import dataclass

import networkx as nx

from .explain import Explanation
from .report import GuardReport

__all__ = ["dependency_svg", "render_html"]

_STATUS_ORDER = {"refuted": 0, "unknown": 1, "warning": 2, "not checked": 3, "proven": 4}
_BADGE = {"refuted": "refuted", "unknown": "unknown", "not checked": "run time", "warning": "0/1 warning",
          "proven": "proven"}


def _e(value) -> str:
    return html.escape(str(value), quote=True)


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
    marker = f"arrow-{target[0]}-{target[1]}"
    inputs = ", ".join(n[1] for n in sub if n[0] == "input") or "no input dim"
    parts = [(f'<svg class="graph" role="img" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
              f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">'),
             f"<title>{_e(target[0])} #{_e(target[1])} depends on {_e(inputs)}</title>",
             (f'<defs><marker id="{_e(marker)}" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" '
              'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#8c959f"/></marker></defs>')]
    for a, b in sub.edges:
        (xa, ya, wa), (xb, yb, _) = box[a], box[b]
        x1, y1, x2, y2 = xa + wa, ya + _NODE_H / 2, xb - 2, yb + _NODE_H / 2
        bend = (x2 - x1) / 2
        parts.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} '
                     f'{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" marker-end="url(#{_e(marker)})"/>')
    for n, (bx, by, w) in box.items():
        head, sub_text, cls = text[n]
        parts.append(f'<g class="node {cls}"><rect x="{bx:.1f}" y="{by:.1f}" width="{w:.1f}" '
                     f'height="{_NODE_H}" rx="6"/><text x="{bx + 10:.1f}" y="{by + 16:.1f}" '
                     f'class="l1">{_e(head)}</text><text x="{bx + 10:.1f}" y="{by + 30:.1f}" '
                     f'class="l2">{_e(sub_text)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------ page sections
def _counts(report: GuardReport, env) -> dict[str, int]:
    status = Counter(g.verdict.status.value if g.verdict else "not checked" for g in report.guards)
    return {"guards": len(report.guards), "refuted": status["refuted"], "unknown": status["unknown"],
            "proven": status["proven"],
            "kept": sum(1 for g in report.kept_guards if not (g.verdict and g.verdict.refuted)),
            "asserts": len(env.runtime_asserts)}


def _by(counter: Counter) -> str:
    return ", ".join(f"{_e(name)} {n}" for name, n in counter.most_common()) or "none"


def _header(env, report, discharged, *, title, model, exported, seconds) -> str:
    counts = _counts(report, env)
    outcome = ('<span class="outcome ok">exported</span>' if exported
               else '<span class="outcome bad">export failed</span>')
    took = "" if seconds is None else f" {'in' if exported else 'after'} {seconds:.2f} s"
    tiles = [("guards", counts["guards"], ""),
             ("refuted", counts["refuted"], "bad" if counts["refuted"] else ""),
             ("unknown", counts["unknown"], "warn" if counts["unknown"] else ""),
             ("proven", counts["proven"], "ok" if counts["proven"] else ""),
             ("kept as input checks", counts["kept"], ""), ("runtime asserts", counts["asserts"], ""),
             ("discharged by the engine", len(discharged), "ok" if discharged else "")]
    guard_strategies = Counter(g.verdict.strategy for g in report.guards if g.verdict)
    return (f'<header><div class="title"><h1>{_e(title)}</h1>{outcome}</div>'
            f'<p class="meta">{"model <b>" + _e(model) + "</b>, " if model else ""}'
            f'{"exported" if exported else "failed"}{_e(took)}; every shape question decided by '
            'shapeproof</p><div class="tiles">'
            + "".join(f'<div class="tile {cls}"><b>{n}</b><span>{_e(label)}</span></div>'
                                            for label, n, cls in tiles) + '</div>'
            f'<p class="meta">guards decided by: {_by(guard_strategies)}; '
            f'discharged by: {_by(Counter(q.strategy for q in discharged))}</p></header>')


def _fix_text(fix) -> str:
    kept = ""
    if fix.kept is not None:
        kept = ('<span class="kept"><span class="bar"><span '
                f'style="width:{max(0.0, min(fix.kept, 1.0)) * 100:.0f}%">'
                f'</span></span>keeps {fix.kept:.0%} of the declared range</span>')
    return f'<li><code>{_e(fix.description)}</code>{kept}</li>'


def _failure_box(report, failure) -> str:
    items = []
    if report.combined_fixes:
        items.append('<h2>Fix</h2><p>Verified to satisfy every failed guard at once '
                     '(<code>shapeproof.suggest_dynamic_shapes(error, spec)</code> applies it):</p>'
                     '<ul class="fixes">' + "".join(_fix_text(f) for f in report.combined_fixes) + "</ul>")
    for source, size, declared in report.specialized:
        items.append(f'<p><code>{_e(source)}</code> is declared dynamic {_e(declared)} but the example input '
                     f'has size {_e(size)}, which torch.export specializes to a constant: use an example '
                     'with a size &gt;= 2 there.</p>')
    if failure:
        items.append('<details><summary>the error torch raised while '
                     f'tracing</summary><pre>{_e(failure)}</pre>'
                     '</details>')
    return f'<section class="failure">{"".join(items)}</section>' if items else ""


def _where(where: dict | None) -> str:
    if not where:
        return '<div class="where muted">no source location recorded</div>'
    op = f' <span class="op">{_e(where["op"])}</span>' if where.get("op") else ""
    if not where.get("file"):
        return (f'<div class="where">{op} <span class="muted">(no user frame: raised inside torch)</span>'
                '</div>')
    short = f'{os.path.basename(where["file"])}:{where["line"]}'
    return (f'<div class="where"><span class="file" title="{_e(where["file"])}">{_e(short)}</span> '
            f'in <code>{_e(where["function"])}</code>{op}<pre class="code">{_e(where["code"])}</pre></div>')


def _dims(ex: Explanation) -> str:
    if not ex.dims:
        return '<p class="muted">depends on no input dim</p>'
    rows = "".join(f'<tr><td><code>{_e(d.path)}</code></td><td><code>{_e(d.name)}</code></td>'
                   f'<td>{_e(_span(d.declared))}</td>'
                   f'<td>{_e("" if d.example is None else d.example)}</td></tr>'
                   for d in ex.dims)
    return ('<table class="dims"><tr><th>input dim</th><th>Dim</th><th>declared</th><th>example</th></tr>'
            f'{rows}</table>')


def _span(r) -> str:
    lo, hi = r
    return f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"


def _counterexample(ex: Explanation) -> str:
    if ex.counterexample is None:
        return ""
    point = " ".join(f'<span class="chip">{_e(k)} = {_e(v)}</span>' for k, v in ex.counterexample.items())
    rows = []
    for expr, value in ex.steps:
        cls = {"True": "true", "False": "false"}.get(value, "")
        rows.append(f'<tr class="{cls}"><td><code>{_e(expr)}</code></td>'
                    f'<td><code>{_e(value)}</code></td></tr>')
    return (f'<div class="cex"><h4>Fails at {point}</h4>'
            '<table class="steps"><tr><th>evaluated step by '
            f'step</th><th>value</th></tr>{"".join(rows)}</table></div>')


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def _card(env, card: _Card) -> str:
    ex = card.explanation
    key = card.status.replace(" ", "-").replace("/", "")
    decided = (f"{_e(card.strategy)} in {_ms(card.ms)}" if card.ms is not None
               else "checked by the program at run time" if ex.kind == "runtime assert" else "not decided")
    fixes = ""
    if ex.fixes:
        fixes = ('<h4>Fixes, each verified</h4><ul class="fixes">' + "".join(_fix_text(f) for f in ex.fixes)
                 + "</ul>")
    elif ex.status == "refuted":
        fixes = '<h4>Fixes</h4><p class="muted">No single-dim fix; the combined fix above covers it.</p>'
    warning = ""
    if card.warning:
        point = ", ".join(f"{k} = {v}" for k, v in card.warning.items())
        warning = (f'<p class="note">Holds from size 2 up but not at {_e(point)}, which the declared range '
                   "allows; torch.export assumes sizes 0 and 1 behave like 2.</p>")
    body = [_where(ex.where), '<div class="grid">',
            f"<div><h4>Depends on</h4>{_dims(ex)}</div>",
            f'<div class="graphbox">{dependency_svg(env, card.node, card.status)}</div>',
            f"<div>{_counterexample(ex)}</div><div>{fixes}</div></div>", warning]
    body += [f'<p class="note">{_e(n)}</p>' for n in ex.notes]
    body.append(f'<p class="engine">engine form: <code>{_e(ex.engine_condition)}</code></p>')
    is_open = " open" if card.status in ("refuted", "unknown", "warning") else ""
    return (f'<details class="card s-{key}" id="{_e(card.node[0])}-{_e(card.node[1])}"{is_open}><summary>'
            f'<span class="badge b-{key}">{_e(_BADGE.get(card.status, card.status))}</span>'
            f'<span class="kind">{_e(ex.kind)} #{ex.index}</span><code class="cond">{_e(ex.condition)}</code>'
            f'<span class="decided">{decided}</span></summary>{"".join(body)}</details>')


_EXAMPLE_CHARS = 160


def _discharged(env, queries) -> str:
    """Questions torch left open that the engine proved, grouped by source line, then op (as the CLI does)."""
    if not queries:
        return ""
    groups: dict[tuple, dict] = {}
    for q in queries:
        frame = q.where.frame if q.where is not None else None
        line = (f"{os.path.basename(frame.filename)}:{frame.lineno}", frame.code, frame.filename) if frame \
            else ("(torch internals)", "", "")
        groups.setdefault(line, {}).setdefault(q.where.op if q.where is not None else None, []).append(q)
    rows = []
    for (place, code, filename), ops in groups.items():
        rows.append('<tr class="line"><td colspan="5"><span class="file" '
                    f'title="{_e(filename)}">{_e(place)}</span>'
                    f'<code class="src">{_e(code)}</code></td></tr>')
        for op, items in ops.items():
            example = min((env.render(q.goal) for q in items), key=len)
            shown = example if len(example) <= _EXAMPLE_CHARS else example[:_EXAMPLE_CHARS - 3] + "..."
            rows.append(f'<tr><td><span class="op">{_e(op or "-")}</span></td><td '
                        f'class="num">{len(items)}</td>'
                        f'<td class="num">{_ms(sum(q.seconds for q in items) * 1000)}</td>'
                        f'<td class="nowrap">{_by(Counter(q.strategy for q in items))}</td>'
                        f'<td><code title="{_e(example)}">{_e(shown)}</code></td></tr>')
    return (f'<section><h2>Discharged by the engine <span class="count">{len(queries)}</span></h2>'
            '<p class="muted">Questions torch&#x27;s own reasoning left open; the engine proved each one, so '
            'the program records no guard for it.</p><table class="discharged"><tr><th>source line, '
            'op</th><th class="num">questions</th><th '
            'class="num">time</th><th>strategy</th><th>e.g.</th></tr>'
            + "".join(rows)
            + "</table></section>")


def render_html(env, report: GuardReport, *, title: str, model: str = "", exported: bool,
                seconds: float | None = None, program: str | None = None, failure: str | None = None,
                notes=()) -> str:
    """The whole page for the shape environment ``env`` of one export and its ``produce_guards`` report.

    ``program`` is a text summary of the exported program (shown when given);
    ``failure`` the text of the error torch raised, if any; ``notes`` what the
    export wants the reader to know (specializations, regions, input checks).
    """
    discharged = [q for q in env.queries if q.status == "proven"]
    cards = _cards(env, report)
    failed = sum(1 for c in cards if c.status == "refuted")
    guards = ('<section><h2>Guards and runtime asserts <span class="count">' + str(len(cards))
              + "</span></h2>"
              + (f'<p class="muted">{failed} failed, shown first; proven ones are folded.</p>' if failed
                 else "")
              + ("".join(_card(env, c) for c in cards) or '<p class="muted">The program needs no guard.</p>')
              + "</section>")
    prog = (f'<section><h2>Exported program</h2><pre class="program">{_e(program)}</pre></section>'
            if program else "")
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>'
            + _header(env, report, discharged, title=title, model=model, exported=exported, seconds=seconds)
            + ("" if exported else _failure_box(report, failure))
            + (f'<div class="notes">{_e(chr(10).join(notes))}</div>' if notes else "") + guards
            + _discharged(env, discharged) + prog
            + '<footer>shapeproof report: self-contained, no scripts, no external resources.</footer>'
            + "</main></body></html>\n")


_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--red:#cf222e;--red-bg:#ffebe9;--green:#1a7f37;
--green-bg:#dafbe1;--amber:#9a6700;--amber-bg:#fff8c5;--blue:#0969da;--blue-bg:#ddf4ff;
--mono:ui-monospace,SFMono-Regular,"DejaVu Sans Mono",Menlo,Consolas,monospace}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.5 -apple-system,"Segoe UI",Roboto,"Liberation Sans","Helvetica Neue",Arial,sans-serif}
main{max-width:1120px;margin:0 auto;padding:24px 24px 40px}
code,pre{font-family:var(--mono);font-size:12.5px}
pre{margin:0;white-space:pre-wrap;word-break:break-word}
h1{font-size:22px;margin:0}
h2{font-size:17px;margin:28px 0 8px}
h4{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);margin:14px 0 6px}
header{background:#fff;border:1px solid var(--line);border-radius:10px;padding:18px 20px}
.title{display:flex;align-items:center;gap:14px}
.meta{color:var(--muted);margin:6px 0 0}
.outcome{font-weight:600;font-size:13px;padding:3px 12px;border-radius:20px;text-transform:uppercase;
letter-spacing:.04em}
.outcome.ok{background:var(--green-bg);color:var(--green)}
.outcome.bad{background:var(--red-bg);color:var(--red)}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0 4px}
.tile{flex:1 1 110px;border:1px solid var(--line);border-radius:8px;padding:8px 12px;background:#fff}
.tile b{display:block;font-size:22px;line-height:1.2}
.tile span{color:var(--muted);font-size:12px}
.tile.bad{border-color:#ff818266;background:var(--red-bg)}.tile.bad b{color:var(--red)}
.tile.warn{background:var(--amber-bg)}.tile.warn b{color:var(--amber)}
.tile.ok b{color:var(--green)}
.failure{margin-top:16px;background:#fff;border:1px solid var(--line);border-left:4px solid var(--red);
border-radius:10px;padding:4px 20px 12px}
.failure h2{margin-top:12px}
.count{font-weight:400;color:var(--muted);font-size:14px;margin-left:4px}
.muted{color:var(--muted)}
.notes{background:var(--amber-bg);border:1px solid #eed888;border-radius:8px;padding:10px 14px;
margin:16px 0 0;white-space:pre-wrap;font-size:13px}
.note{background:var(--amber-bg);border-radius:6px;padding:5px 10px;margin:8px 0;font-size:13px}
.card{background:#fff;border:1px solid var(--line);border-left:4px solid var(--line);border-radius:8px;
margin:10px 0;padding:0 16px}
.card>summary{cursor:pointer;list-style:none;display:flex;align-items:center;gap:10px;padding:11px 0;
flex-wrap:wrap}
.card>summary::-webkit-details-marker{display:none}
.card[open]>summary{border-bottom:1px solid var(--line)}
.card>:last-child{margin-bottom:12px}
.s-refuted{border-left-color:var(--red)}.s-unknown,.s-warning{border-left-color:#d4a72c}
.s-proven{border-left-color:#4ac26b}.s-not-checked{border-left-color:var(--blue)}
.badge{font-size:11px;font-weight:600;text-transform:uppercase;letter-spacing:.04em;padding:2px 8px;
border-radius:12px;white-space:nowrap}
.b-refuted{background:var(--red-bg);color:var(--red)}.b-proven{background:var(--green-bg);color:var(--green)}
.b-unknown,.b-warning{background:var(--amber-bg);color:var(--amber)}
.b-not-checked{background:var(--blue-bg);color:var(--blue)}
.kind{color:var(--muted);white-space:nowrap}
.cond{font-size:13.5px;font-weight:600;flex:1 1 300px}
.decided{color:var(--muted);font-size:12px;white-space:nowrap}
.where{margin:12px 0 4px}
.file{font-family:var(--mono);font-size:12.5px;color:var(--blue);font-weight:600}
.op{font-family:var(--mono);font-size:11.5px;background:var(--bg);border:1px solid var(--line);
border-radius:4px;padding:0 5px;margin-left:6px;color:var(--muted)}
pre.code{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:7px 10px;margin:6px 0}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 32px;align-items:start}
.graphbox{overflow-x:auto;padding-top:30px}
table{border-collapse:collapse}
th{text-align:left;font-weight:600;font-size:12px;color:var(--muted);border-bottom:1px solid var(--line);
padding:4px 14px 4px 0}
td{padding:4px 14px 4px 0;border-bottom:1px solid #eff2f5;vertical-align:top}
.steps tr.false td{background:var(--red-bg)}
.steps tr.false td:last-child code{color:var(--red);font-weight:600}
.steps tr.true td:last-child code{color:var(--green);font-weight:600}
.steps td:first-child{padding-left:8px}
.chip{font-family:var(--mono);text-transform:none;letter-spacing:0;font-size:12.5px;color:var(--red);
background:var(--red-bg);border-radius:4px;padding:1px 7px;margin-left:4px}
.fixes{margin:0;padding-left:18px}.fixes li{margin:4px 0}
.kept{color:var(--muted);font-size:12px;margin-left:10px;white-space:nowrap}
.bar{display:inline-block;width:60px;height:6px;background:#eff2f5;border-radius:3px;margin-right:6px;
vertical-align:middle;overflow:hidden}.bar span{display:block;height:100%;background:#4ac26b}
.engine{color:var(--muted);font-size:12px}
.discharged{width:100%;background:#fff;border:1px solid var(--line);border-radius:8px}
.discharged td,.discharged th{padding:6px 10px}.discharged th:last-child{width:48%}
.discharged tr.line td{background:var(--bg);border-top:1px solid var(--line)}
.discharged .src{margin-left:12px;color:var(--fg)}
.discharged td:first-child{padding-left:22px}.discharged tr.line td:first-child{padding-left:10px}
.num{text-align:right;white-space:nowrap}.nowrap{white-space:nowrap}
.program{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px}
footer{color:var(--muted);font-size:12px;margin-top:32px;text-align:center}
svg.graph{max-width:100%;height:auto}
.graph text{font-family:var(--mono);font-size:12px}
.graph .l2{fill:var(--muted);font-size:11px}
.graph .edge{fill:none;stroke:#8c959f;stroke-width:1.3}
.graph rect{stroke-width:1.2}
.graph .in rect{fill:var(--blue-bg);stroke:#54aeff}
.graph .sym rect{fill:#f6f8fa;stroke:#8c959f}
.graph .t-refuted rect{fill:var(--red-bg);stroke:var(--red)}
.graph .t-proven rect{fill:var(--green-bg);stroke:#4ac26b}
.graph .t-unknown rect,.graph .t-warning rect{fill:var(--amber-bg);stroke:#d4a72c}
.graph .t-not-checked rect{fill:var(--blue-bg);stroke:var(--blue)}
"""
