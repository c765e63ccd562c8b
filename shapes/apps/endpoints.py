"""What each service endpoint accepts, computes, and answers when its work is stopped.

``task`` (in the server) checks a JSON body's fields, types and ranges and
returns a plain-JSON task, or raises ``BadRequest``; no guard text is parsed
there.  ``run`` (in a worker process) parses the text with the service's
limits and calls the engine.  ``stopped`` (in the server) is the answer when
the worker was killed at its deadline or ran out of memory: *unknown*, with
the reason, in the shape of a normal answer.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from http import HTTPStatus

from shapeproof import solver as S
from shapeproof.solver import (
    STRATEGIES, Limits, ParseError, parse, parse_condition, prove, simplify, term_str,
)

from shapeproof.shapes import Explanation, InputError, check_name, check_seconds, check_span, explain_guard

from .torch_messages import explain_torch_error

__all__ = ["ROUTES", "BadRequest", "ServiceLimits", "run", "stopped", "task"]

ROUTES = ("/prove", "/explain", "/simplify")
_MAX_BOUND = 10 ** 18


@dataclass(frozen=True)
class ServiceLimits:
    max_body: int = 64 * 1024           # bytes of a request body
    max_text: int = 4096                # characters of one expression
    max_facts: int = 32
    max_symbols: int = 16
    max_timeout: float = 5.0            # seconds for a request's whole work; larger requests are capped
    grace: float = 0.5                  # a worker still busy this long after the timeout is killed
    max_workers: int = 32               # solver processes at once; a request waits for one until its timeout
    worker_memory: int = 512 << 20      # bytes a worker may map beyond its start
    max_connections: int = 256          # open connections; more are answered 503 at once
    idle_timeout: float = 10.0          # a connection silent this long is closed
    read_timeout: float = 30.0          # reading one request takes at most this long
    max_message: int = 32 * 1024        # characters of a torch error message
    max_guards: int = 24                # guards explained from one message
    parse: Limits = field(default_factory=lambda: Limits(max_chars=4096, max_depth=48, max_int_digits=30,
                                                         max_exponent=16))


class BadRequest(Exception):
    def __init__(self, status: HTTPStatus, error: str, detail: str = ""):
        super().__init__(error)
        self.status, self.error, self.detail = status, error, detail

    def payload(self) -> dict:
        return {"error": self.error, "detail": self.detail, "status": int(self.status)}


# ---------------------------------------------------------------------------- in the server: checks

_FIELDS = {"/prove": {"goal", "ranges", "facts", "strategy", "timeout"},
           "/explain": {"guard", "ranges", "sources", "timeout", "message"},
           "/simplify": {"expr", "ranges", "timeout"}}


def _bad(error: str, detail: str = "") -> BadRequest:
    return BadRequest(HTTPStatus.BAD_REQUEST, error, detail)


def _text(body: dict, key: str, cap: int) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise _bad(f"'{key}' must be a string")
    if len(value) > cap:
        raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"'{key}' is longer than {cap} characters")
    return value


def _ranges(body: dict, limits: ServiceLimits) -> dict:
    raw = body.get("ranges", {})
    if not isinstance(raw, dict) or len(raw) > limits.max_symbols:
        raise _bad(f"'ranges' must map at most {limits.max_symbols} names to [lo, hi]")
    out = {}
    for name, span in raw.items():
        if not isinstance(span, list) or len(span) != 2:
            raise _bad(f"bad range for {name[:40]!r}: use [lo, hi] with integers or null")
        try:
            lo, hi = check_span(check_name(name), *span)
        except InputError as exc:
            raise _bad(f"bad range for {name[:40]!r}", str(exc)) from None
        if any(end is not None and abs(end) > _MAX_BOUND for end in (lo, hi)):
            raise _bad(f"bad range for {name!r}: bounds must lie within ±10**18")
        out[name] = [lo, hi]
    return out


def _budget(body: dict, limits: ServiceLimits) -> float:
    try:
        return min(check_seconds(body.get("timeout", 2.0), "'timeout'"), limits.max_timeout)
    except InputError as exc:
        raise _bad(str(exc)) from None


def _strategy(body: dict) -> str:
    name = body.get("strategy", "cascade")
    if not isinstance(name, str) or name not in STRATEGIES:
        raise _bad(f"unknown strategy {str(name)[:40]!r}", f"one of {sorted(STRATEGIES)}")
    return name


def _facts(body: dict, limits: ServiceLimits) -> list[str]:
    facts = body.get("facts", [])
    if not isinstance(facts, list) or len(facts) > limits.max_facts:
        raise _bad(f"'facts' must be a list of at most {limits.max_facts} strings")
    return [_text({"fact": f}, "fact", limits.max_text) for f in facts]


def _sources(body: dict, limits: ServiceLimits) -> dict:
    sources = body.get("sources", {})
    if (not isinstance(sources, dict) or len(sources) > limits.max_symbols
            or not all(isinstance(v, str) and len(v) < 200 for v in sources.values())):
        raise _bad(f"'sources' must map at most {limits.max_symbols} names to strings under 200 characters")
    try:
        for name in sources:
            check_name(name)
    except InputError as exc:
        raise _bad("bad name in 'sources'", str(exc)) from None
    return sources


def task(route: str, body: dict, limits: ServiceLimits) -> dict:
    """The checked, JSON-only task for ``body`` posted to ``route``; raises ``BadRequest``."""
    unknown = sorted(set(body) - _FIELDS[route])
    if unknown:
        raise _bad(f"unknown field(s) {', '.join(repr(k[:40]) for k in unknown[:5])}",
                   f"{route} takes {sorted(_FIELDS[route])}")
    out = {"route": route, "budget": _budget(body, limits), "parse": asdict(limits.parse)}
    if route == "/prove":
        out.update(goal=_text(body, "goal", limits.max_text), facts=_facts(body, limits),
                   ranges=_ranges(body, limits), strategy=_strategy(body))
    elif route == "/explain" and "message" in body:
        if set(body) - {"message", "timeout"}:
            raise _bad("an explain request has either a 'message' (and 'timeout') or a 'guard'")
        out.update(message=_text(body, "message", limits.max_message), max_guards=limits.max_guards)
    elif route == "/explain":
        out.update(guard=_text(body, "guard", limits.max_text), ranges=_ranges(body, limits),
                   sources=_sources(body, limits))
    else:
        out.update(expr=_text(body, "expr", limits.max_text), ranges=_ranges(body, limits))
    return out


def stopped(task: dict, reason: str, seconds: float) -> dict:
    """The answer for a task whose work was stopped: *unknown*, shaped like the endpoint's normal answer."""
    if task["route"] == "/prove":
        return {"status": "unknown", "counterexample": None, "strategy": task["strategy"],
                "seconds": seconds, "reason": reason}
    if task["route"] == "/simplify":
        return {"simplified": None, "reason": reason}
    if "message" in task:
        return {"guards": [], "reason": reason}
    ex = Explanation("guard", 0, task["guard"], task["guard"], None, [], "unknown", None, None,
                     notes=[reason])
    return {**ex.to_dict(), "text": ex.text}


# ---------------------------------------------------------------------------- in a worker: the work

def run(task: dict, seconds: float) -> dict:
    """``{"status": http status, "body": payload}`` for ``task``, using at most about ``seconds``."""
    limits, budget = Limits(**task["parse"]), max(0.05, min(seconds, task["budget"]))
    try:
        return {"status": 200, "body": _WORK[_kind(task)](task, limits, budget)}
    except BadRequest as exc:
        return {"status": int(exc.status), "body": exc.payload()}
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - never a traceback to the client; the reason only
        return {"status": 500,
                "body": {"error": "internal error", "detail": type(exc).__name__, "status": 500}}


def _kind(task: dict) -> str:
    return "message" if "message" in task else task["route"]


def _parsed(text: str, limits: Limits, reader=parse_condition, what: str = "not a guard"):
    try:
        return reader(text, limits)
    except ParseError as exc:
        raise _bad(what, str(exc)) from None
    except RecursionError:
        raise _bad("expression nested too deeply") from None


def _spans(ranges: dict) -> dict:
    return {name: tuple(span) for name, span in ranges.items()}


def _prove(task: dict, limits: Limits, budget: float) -> dict:
    goal = _parsed(task["goal"], limits)
    facts = [_parsed(text, limits) for text in task["facts"]]
    v = prove(goal, ranges=_spans(task["ranges"]), facts=facts, strategy=task["strategy"], timeout=budget)
    return {"status": v.status.value, "counterexample": v.counterexample, "strategy": v.strategy,
            "seconds": v.seconds, "reason": v.reason}


def _explain_guard(task: dict, limits: Limits, budget: float) -> dict:
    _parsed(task["guard"], limits)                # reject bad text with the service's limits first
    try:
        ex = explain_guard(task["guard"], _spans(task["ranges"]), sources=task["sources"], timeout=budget)
    except ValueError as exc:                     # a constant guard: nothing to explain
        raise _bad(str(exc)) from None
    return {**ex.to_dict(), "text": ex.text}


def _explain_message(task: dict, limits: Limits, budget: float) -> dict:
    # one budget for the whole message: guards past it come back "not checked"
    results = explain_torch_error(task["message"], timeout=budget, max_guards=task["max_guards"],
                                  budget=budget)
    return {"guards": [{"guard": found.guard, "kind": found.kind, **ex.to_dict()} for found, ex in results]}


def _simplify(task: dict, limits: Limits, budget: float) -> dict:
    value = _parsed(task["expr"], limits, parse, "not an expression")
    start = time.monotonic()
    try:
        result = simplify(value, _spans(task["ranges"]), timeout=budget)
    except Exception:
        if time.monotonic() - start < budget:
            raise
        # simplify signals a spent budget with an exception of its own (a private class)
        return {"simplified": None, "reason": f"the time limit ({budget:.2g} s) ran out while simplifying"}
    return {"simplified": str(result) if isinstance(result, S.Formula) else term_str(result)}


_WORK = {"/prove": _prove, "/explain": _explain_guard, "message": _explain_message, "/simplify": _simplify}
