"""Imported by the service's fork server, once: one request of each kind, so every worker starts warm.

The first call of each endpoint in a process builds caches and lazily
imported state (about a second in all, measured: 1 s for the first explain,
7 ms for the next).  Workers are forked from the fork server, so doing that
work there once gives every worker, including each replacement of a killed
one, warm state instead of a slow first request.
"""
from __future__ import annotations

from .endpoints import ServiceLimits, run, task

_KINDS: list[tuple[str, dict]] = [
    ("/prove", {"goal": "(W % 8) != 0", "ranges": {"W": [2, 64]}}),
    ("/prove", {"goal": "((2*T*T) // T) == 2*T", "ranges": {"T": [2, None]}, "strategy": "z3"}),
    ("/prove", {"goal": "(1 % (1 + ((L - 1) // S))) != 0", "ranges": {"L": [2, None], "S": [2, None]},
                "facts": ["L >= 2*S"]}),
    ("/explain", {"guard": "(H % 4) != 0", "ranges": {"H": [2, None]}}),
    ("/explain",
     {"message": "Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy "
                             "the generated guard (L['x'].size()[1] % 8) != 0."}),
    ("/simplify", {"expr": "(N + ((8 - N % 8) % 8)) // 8", "ranges": {"N": [1, None]}}),
]

for _route, _body in _KINDS:
    run(task(_route, _body, ServiceLimits()), 5.0)
