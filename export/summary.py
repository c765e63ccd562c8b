"""Readable summaries of an exported program and of what the engine proved for it."""
from __future__ import annotations

from collections import Counter, OrderedDict

from torch.export import ExportedProgram

from shapeproof.shapes import Query, ShapeEnv

__all__ = ["program_summary", "discharged_table"]


def program_summary(ep: ExportedProgram) -> str:
    sig = ep.graph_signature
    outputs = [n for n in ep.graph.nodes if n.op == "output"][0].args[0]
    out_shapes = [str(tuple(o.meta["val"].shape)) for o in outputs if hasattr(o, "meta") and "val" in o.meta]
    calls = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    lines = [
        "ExportedProgram:",
        f"  user inputs:   {', '.join(sig.user_inputs)}",
        f"  parameters:    {len(sig.parameters)}, buffers: {len(sig.buffers)}",
        f"  graph:         {calls} ATen calls",
        f"  outputs:       {', '.join(out_shapes)}",
        "  range constraints: "
        + ", ".join(f"{k}: [{v.lower}, {v.upper}]" for k, v in ep.range_constraints.items()),
    ]
    return "\n".join(lines)


def discharged_table(env: ShapeEnv, queries: list[Query], limit: int = 10) -> str:
    """Discharged questions grouped by source line and op: how many, by which strategies, one example."""
    groups: OrderedDict[tuple, list[Query]] = OrderedDict()
    for q in queries:
        frame = q.where.frame if q.where is not None else None
        op = q.where.op if q.where is not None else None
        groups.setdefault((frame.short if frame else "(torch internals)", frame.code if frame else "", op),
                          []).append(q)
    lines = []
    for (place, code, op), items in list(groups.items())[:limit]:
        strategies = Counter(q.strategy for q in items)
        example = min((env.render(q.goal) for q in items), key=len)
        total_ms = sum(q.seconds for q in items) * 1000
        lines.append(f"  {place}  {code[:70]}" + (f"  [{op}]" if op else ""))
        lines.append(f"      {len(items)} guard(s), {total_ms:.0f} ms, by " +
                     ", ".join(f"{name} {n}" for name, n in strategies.most_common()))
        lines.append(f"      e.g. {example[:100]}{'...' if len(example) > 100 else ''}")
    if len(groups) > limit:
        lines.append(f"  ... and {len(groups) - limit} more places")
    return "\n".join(lines)
