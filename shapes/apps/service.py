"""``shapeproof serve``: the torch-free engine as a small HTTP JSON service.

    POST /prove     {"goal": "...", "ranges": {"T": [2, 4096]}, "facts": [...], "strategy": "cascade",
                     "timeout": 2}
    POST /explain   {"guard": "...", "ranges": {...}, "sources": {"T": "x.size(1)"}}
                    or  {"message": "<torch error>"}
    POST /simplify  {"expr": "...", "ranges": {...}}
    GET  /health, GET /openapi.json

Standard library only (``ThreadingHTTPServer``).  Every field is checked for
type and range before any work (``endpoints.task``: 400 otherwise); guard
text is read by the safe parser with tight limits, in a worker.

A request's ``timeout`` (default 2 s, capped at 5 s) bounds its whole work,
parsing included, counted from the moment its connection was accepted: the
work runs in a worker process (``workers.WorkerPool``) that is told to stop
at the timeout and killed ``grace`` (0.5 s) later if it has not, so no
request's work outlasts timeout + 0.5 s from its accept, and its answer
follows as soon as the server gets the CPU to send it (``bench.service_load``
measured 1.55-1.97 s for the slowest 1 s request on a busy 2-core machine);
work that was stopped answers *unknown* with a reason that starts with
"stopped".  Expensive work is paused to one CPU, so it cannot
starve cheap requests.  A request that finds every worker busy until its
timeout gets 503.  A connection that sends nothing for ``idle_timeout`` (10
s) or has not delivered its request within ``read_timeout`` (30 s) is
closed; past ``max_connections`` (256) open connections, new ones get 503.
Every error is a JSON object ``{"error": ..., "detail": ..., "status": ...}``,
never a traceback.  A script that calls ``make_server`` must guard its main
code with ``if __name__ == "__main__"`` (multiprocessing re-imports it).
"""
from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from shapeproof.solver import STRATEGIES

from .endpoints import ROUTES, BadRequest, ServiceLimits, stopped, task
from .workers import WorkerPool

__all__ = ["OPENAPI_PATH", "ServiceLimits", "make_server", "serve"]

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
_MIN_WORK = 0.05                    # seconds of work a request gets even if reading it used its budget
_DRAIN_LIMIT = 32 * 1024 * 1024     # bodies up to this size are read and discarded before a 413
_BUSY_BODY = json.dumps({"error": "busy: too many connections, retry", "detail": "", "status": 503}).encode()
_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


class Handler(BaseHTTPRequestHandler):
    server_version = "shapeproof"
    limits: ServiceLimits = ServiceLimits()
    pool: WorkerPool
    server: _Server          # the server that made this handler (it tracks reading)

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

    def send_error(self, code, message=None, explain=None):
        """Errors http.server answers itself (501 for another method, 414, 431, a malformed request line) are
        the service's JSON object too, not its HTML page."""
        try:
            status = HTTPStatus(code)
        except ValueError:
            status = HTTPStatus.INTERNAL_SERVER_ERROR
        self.close_connection = True
        self._error(status, message or status.phrase, explain or "")

    def do_GET(self):
        self.server.done_reading(self.connection)
        if self.path == "/health":
            self._send(HTTPStatus.OK, {"status": "ok", "strategies": sorted(STRATEGIES), **self.pool.stats()})
        elif self.path == "/openapi.json":
            self._send(HTTPStatus.OK, json.loads(OPENAPI_PATH.read_text()))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {self.path[:100]}")

    def do_POST(self):
        if self.path not in ROUTES:
            self.server.done_reading(self.connection)
            return self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {self.path[:100]}")
        body = self._body()
        accepted = self.server.done_reading(self.connection)
        if body is None:
            return
        try:
            work = task(self.path, body, self.limits)
        except BadRequest as exc:
            return self._send(exc.status, exc.payload())
        # the budget counts from the accept: waiting for a thread on a busy machine is the client's
        # wait too (a client slow to send its body still gets _MIN_WORK)
        due = max(accepted + work["budget"], time.monotonic() + _MIN_WORK)
        start = due - work["budget"]
        reply = self.pool.call(work, due=due, grace=self.limits.grace)
        if reply.kind == "answer" and reply.body is not None:
            return self._send(HTTPStatus(reply.body["status"]), reply.body["body"])
        if reply.kind == "busy":
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, "busy: every solver process was taken until "
                               "this request's timeout, retry")
        reason = {"timeout": f"stopped at the request's time limit ({work['budget']:g} s)",
                  "memory": f"stopped: the work reached the memory limit ({self.limits.worker_memory >> 20} "
                  "MiB)", "died": "stopped: the solver process ended unexpectedly"}[reply.kind]
        self._send(HTTPStatus.OK, stopped(work, reason, round(time.monotonic() - start, 3)))

    def _body(self) -> dict | None:
        """The JSON object posted, or None after answering why there is none."""
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return None
        if length > self.limits.max_body or length < 0:
            self.close_connection = True
            if 0 < length <= _DRAIN_LIMIT:        # read it away so the client sees the answer, not a reset
                for _ in range(0, length, 1 << 20):
                    self.rfile.read(min(1 << 20, length))
                    length -= 1 << 20
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {self.limits.max_body} bytes")
            return None
        data = self.rfile.read(length)
        if len(data) < length:          # the client closed early: an incomplete message (RFC 9112, 6.3)
            self.close_connection = True
            self._error(HTTPStatus.BAD_REQUEST, f"body ended after {len(data)} of its Content-Length "
                        f"{length} bytes")
            return None
        try:
            body = json.loads(data or b"null")
        except (ValueError, UnicodeDecodeError, RecursionError):
            self._error(HTTPStatus.BAD_REQUEST, "body is not JSON")
            return None
        if not isinstance(body, dict):
            self._error(HTTPStatus.BAD_REQUEST, "body must be a JSON object")
            return None
        return body


class _Server(ThreadingHTTPServer):
    """Bounds connections: how many, how long one may stay silent, and how long reading a request takes."""

    # socketserver listens with a backlog of 5: a burst of clients connecting at once
    # overflows it and the kernel resets connections (seen in CI with 16 clients).
    request_queue_size = 128
    daemon_threads = True

    def __init__(self, address, handler, limits: ServiceLimits, pool: WorkerPool):
        self.limits, self.pool = limits, pool
        self._reading: dict[socket.socket, tuple] = {}      # connection -> (accepted, request read by)
        self._open = 0
        self._lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        with self._lock:
            full = self._open >= self.limits.max_connections
            if not full:
                self._open += 1
                now = time.monotonic()
                self._reading[request] = (now, now + self.limits.read_timeout)
        if full:
            try:
                request.setblocking(False)
                request.send(_BUSY)
                request.recv(self.limits.max_body)   # closing with unread bytes would reset the 503 away
            except OSError:
                pass
            return super().shutdown_request(request)
        super().process_request(request, client_address)

    def done_reading(self, request) -> float:
        """The request has been read: no read deadline any more.  Returns when it was accepted."""
        with self._lock:
            accepted, _ = self._reading.pop(request, (time.monotonic(), None))
        return accepted

    def shutdown_request(self, request):
        with self._lock:
            self._reading.pop(request, None)
            self._open -= 1
        super().shutdown_request(request)

    def service_actions(self):
        """Every poll of ``serve_forever`` (0.5 s): end the reads that are overdue."""
        now = time.monotonic()
        with self._lock:
            late = [sock for sock, (_, due) in self._reading.items() if due < now]
        for sock in late:
            try:
                sock.shutdown(socket.SHUT_RDWR)   # the handler's blocked read returns, and its thread ends
            except OSError:
                pass

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):     # a client that left is no error of ours
            super().handle_error(request, client_address)

    def server_close(self):
        super().server_close()
        self.pool.close()


def make_server(host: str = "127.0.0.1", port: int = 8000, limits: ServiceLimits | None = None
                ) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0 picks a free one) with its workers started;
    call ``serve_forever()`` on it, and ``server_close()`` to stop the workers."""
    limits = limits or ServiceLimits()
    pool = WorkerPool("shapeproof.shapes.apps.endpoints:run", preload=["shapeproof.shapes.apps.service_warm"],
                      size=limits.max_workers, memory_bytes=limits.worker_memory)
    handler = type("ShapeproofHandler", (Handler,), {"limits": limits, "pool": pool,
                                                     "timeout": limits.idle_timeout})
    server = _Server((host, port), handler, limits, pool)
    pool.start()
    return server


def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    server = make_server(host, port)
    print(f"shapeproof service on http://{host}:{server.server_port} (GET /openapi.json for the API)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
