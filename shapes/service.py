"""``shapeproof serve``: the torch-free engine as a small HTTP JSON service.

    POST /prove     {"goal": "...", "ranges": {"T": [2, 4096]}, "facts": [...], "strategy": "cascade", "timeout": 2}
    POST /explain   {"guard": "...", "ranges": {...}, "sources": {"T": "x.size(1)"}}  or  {"message": "<torch error>"}
    POST /simplify  {"expr": "...", "ranges": {...}}
    GET  /health, GET /openapi.json

Standard library only (``ThreadingHTTPServer``).  Every input is guard text
read by the safe parser with tight limits; bodies, strings and solver time
are capped; concurrent solver calls are bounded by a semaphore; every error
is a JSON object ``{"error": ..., "detail": ...}`` with a 4xx/5xx status and
never a traceback.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from shapeproof.solver import formula as F
from shapeproof.solver.api import STRATEGIES, prove, simplify
from shapeproof.solver.parse import Limits, ParseError, parse, parse_condition
from shapeproof.solver.terms import term_str

from .standalone import explain_guard
from .torch_messages import explain_torch_error

__all__ = ["OPENAPI_PATH", "ServiceLimits", "make_server", "serve"]

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
_DRAIN_LIMIT = 32 * 1024 * 1024     # bodies up to this size are read and discarded before a 413


@dataclass(frozen=True)
class ServiceLimits:
    max_body: int = 64 * 1024           # bytes of a request body
    max_text: int = 4096                # characters of one expression
    max_facts: int = 32
    max_symbols: int = 16
    max_timeout: float = 5.0            # seconds of solver time per request
    max_concurrent: int = 8             # solver calls at once; more wait, then get 503
    max_message: int = 32 * 1024        # characters of a torch error message
    max_guards: int = 24                # guards explained from one message
    parse: Limits = field(default_factory=lambda: Limits(max_chars=4096, max_depth=48, max_int_digits=30,
                                                         max_exponent=16))


class BadRequest(Exception):
    def __init__(self, status: HTTPStatus, error: str, detail: str = ""):
        super().__init__(error)
        self.status, self.error, self.detail = status, error, detail


def _text(body: dict, key: str, limits: ServiceLimits, cap: int | None = None) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"'{key}' must be a string")
    if len(value) > (cap or limits.max_text):
        raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"'{key}' is longer than {cap or limits.max_text} "
                                                              "characters")
    return value


def _condition(text: str, limits: ServiceLimits) -> F.Formula:
    try:
        return parse_condition(text, limits.parse)
    except ParseError as exc:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "not a guard", str(exc)) from None
    except RecursionError:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "expression nested too deeply") from None


def _ranges(body: dict, limits: ServiceLimits) -> dict:
    raw = body.get("ranges", {})
    if not isinstance(raw, dict) or len(raw) > limits.max_symbols:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"'ranges' must map at most {limits.max_symbols} names to [lo, hi]")
    out = {}
    for name, span in raw.items():
        if (not isinstance(name, str) or not name.isidentifier() or not isinstance(span, list) or len(span) != 2
                or any(v is not None and (not isinstance(v, int) or isinstance(v, bool) or abs(v) > 10 ** 18)
                       for v in span)):
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"bad range for {name!r}: use [lo, hi] with ints or null")
        out[name] = (span[0], span[1])
    return out


def _timeout(body: dict, limits: ServiceLimits) -> float:
    value = body.get("timeout", 2.0)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "'timeout' must be a positive number of seconds")
    return min(float(value), limits.max_timeout)


def _strategy(body: dict) -> str:
    name = body.get("strategy", "cascade")
    if name not in STRATEGIES:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"unknown strategy {name!r}", f"one of {sorted(STRATEGIES)}")
    return name


# ---------------------------------------------------------------------------- endpoints

def do_prove(body: dict, limits: ServiceLimits) -> dict:
    goal = _condition(_text(body, "goal", limits), limits)
    facts = body.get("facts", [])
    if not isinstance(facts, list) or len(facts) > limits.max_facts:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"'facts' must be a list of at most {limits.max_facts} strings")
    parsed = [_condition(_text({"fact": f}, "fact", limits), limits) for f in facts]
    v = prove(goal, ranges=_ranges(body, limits), facts=parsed, strategy=_strategy(body),
              timeout=_timeout(body, limits))
    return {"status": v.status.value, "counterexample": v.counterexample, "strategy": v.strategy,
            "seconds": v.seconds, "reason": v.reason}


def do_explain(body: dict, limits: ServiceLimits) -> dict:
    timeout = _timeout(body, limits)
    if "message" in body:
        message = _text(body, "message", limits, cap=limits.max_message)
        # one budget for the whole message: guards past it come back "not checked" instead of a slow answer
        results = explain_torch_error(message, timeout=timeout, max_guards=limits.max_guards,
                                      budget=2 * limits.max_timeout)
        return {"guards": [{"guard": found.guard, "kind": found.kind, **ex.to_dict()} for found, ex in results]}
    text = _text(body, "guard", limits)
    _condition(text, limits)                      # reject bad text with the service's limits first
    sources = body.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str) and len(v) < 200
                                                for k, v in sources.items()):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "'sources' must map names to short strings")
    try:
        ex = explain_guard(text, _ranges(body, limits), sources=sources, timeout=timeout)
    except ValueError as exc:                     # a constant guard: nothing to explain
        raise BadRequest(HTTPStatus.BAD_REQUEST, str(exc)) from None
    return {**ex.to_dict(), "text": ex.text}


def do_simplify(body: dict, limits: ServiceLimits) -> dict:
    text = _text(body, "expr", limits)
    try:
        value = parse(text, limits.parse)
    except ParseError as exc:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "not an expression", str(exc)) from None
    except RecursionError:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "expression nested too deeply") from None
    result = simplify(value, _ranges(body, limits), timeout=_timeout(body, limits))
    return {"simplified": str(result) if isinstance(result, F.Formula) else term_str(result)}


ROUTES = {"/prove": do_prove, "/explain": do_explain, "/simplify": do_simplify}


class Handler(BaseHTTPRequestHandler):
    server_version = "shapeproof"
    limits: ServiceLimits = ServiceLimits()
    slots: threading.BoundedSemaphore

    def log_message(self, format, *args):
        pass

    def _send(self, status: HTTPStatus, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, error: str, detail: str = "") -> None:
        self._send(status, {"error": error, "detail": detail, "status": int(status)})

    def do_GET(self):
        if self.path == "/health":
            self._send(HTTPStatus.OK, {"status": "ok", "strategies": sorted(STRATEGIES)})
        elif self.path == "/openapi.json":
            self._send(HTTPStatus.OK, json.loads(OPENAPI_PATH.read_text()))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {self.path[:100]}")

    def do_POST(self):
        handler = ROUTES.get(self.path)
        if handler is None:
            return self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path[:100]}")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
        if length > self.limits.max_body or length < 0:
            self.close_connection = True
            if 0 < length <= _DRAIN_LIMIT:        # read it away so the client sees the answer, not a reset
                for _ in range(0, length, 1 << 20):
                    self.rfile.read(min(1 << 20, length))
                    length -= 1 << 20
            return self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {self.limits.max_body} bytes")
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError, RecursionError):
            return self._error(HTTPStatus.BAD_REQUEST, "body is not JSON")
        if not isinstance(body, dict):
            return self._error(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
        if not self.slots.acquire(timeout=self.limits.max_timeout):
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, "busy: too many requests at once, retry")
        try:
            self._send(HTTPStatus.OK, handler(body, self.limits))
        except BadRequest as exc:
            self._error(exc.status, exc.error, exc.detail)
        except Exception as exc:  # noqa: BLE001 - never a traceback to the client; the reason only
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error", type(exc).__name__)
        finally:
            self.slots.release()


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a burst of clients connecting at once
    # overflows it and the kernel resets connections (seen in CI with 16 clients).
    request_queue_size = 128
    daemon_threads = True


def make_server(host: str = "127.0.0.1", port: int = 8000, limits: ServiceLimits = ServiceLimits()
                ) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0 picks a free one); call ``serve_forever()`` on it."""
    handler = type("ShapeproofHandler", (Handler,), {"limits": limits,
                                                     "slots": threading.BoundedSemaphore(limits.max_concurrent)})
    return _Server((host, port), handler)


def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    server = make_server(host, port)
    print(f"shapeproof service on http://{host}:{server.server_port} (GET /openapi.json for the API)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
