"""Load the HTTP service with mixed requests and report errors and latency.

    python -m bench.service_load [--requests 1000] [--clients 8] [--url http://127.0.0.1:8000]

Without ``--url`` it starts ``shapeproof serve`` in a subprocess on a free
loopback port.  The mix: prove (true and false guards), explain (a guard and
a torch error message), simplify, and malformed or hostile requests that must
come back as 4xx JSON.  An *error* is any response whose status differs from
the one expected for its request, a non-JSON body, or a dropped connection.
"""
from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

MESSAGE = ("Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy the generated guard "
           "((L['x'].size()[1] + ((16 + (-1)*(L['x'].size()[1] % 16)) % 16)) // 16) != 1.")

MIX = [  # (path, body or raw bytes, expected status)
    ("/prove", {"goal": "((2*T*T) // T) == 2*T", "ranges": {"T": [2, 4096]}}, 200),
    ("/prove", {"goal": "((1 + (L // 4)) % 8) != 0", "ranges": {"L": [2, 4096]}}, 200),
    ("/prove", {"goal": "(1 % (1 + ((L - 1) // S))) != 0", "ranges": {"L": [2, None], "S": [2, None]},
                "facts": ["L >= 2*S"]}, 200),
    ("/explain", {"guard": "(H // 2) == (2*(H // 4))", "ranges": {"H": [8, 256]}}, 200),
    ("/explain", {"message": MESSAGE}, 200),
    ("/simplify", {"expr": "(T + ((16 - T % 16) % 16)) // 16", "ranges": {"T": [1, None]}}, 200),
    ("/prove", {"goal": "__import__('os').system('id')"}, 400),
    ("/prove", {"goal": "(" * 3000 + "T" + ")" * 3000}, 413),
    ("/prove", b"{not json", 400),
    ("/prove", {"goal": "T > 0", "strategy": "exec"}, 400),
]
HUGE = ("/prove", b"x" * (10 * 1024 * 1024), 413)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(host: str, port: int, path: str, body, timeout: float = 30) -> tuple[int | None, float]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        json.loads(resp.read())
        conn.close()
        return resp.status, time.perf_counter() - start
    except (OSError, ValueError, http.client.HTTPException):
        return None, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--url", default="")
    args = parser.parse_args(argv)

    server = None
    if args.url:
        parsed = urlparse(args.url)
        host, port = parsed.hostname, parsed.port
    else:
        host, port = "127.0.0.1", _free_port()
        server = subprocess.Popen([sys.executable, "-m", "shapeproof", "serve", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection((host, port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
    jobs = [MIX[i % len(MIX)] for i in range(args.requests - 5)] + [HUGE] * 5
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            results = list(pool.map(lambda job: (job, *request(host, port, job[0], job[1])), jobs))
        wall = time.perf_counter() - start
        alive = request(host, port, "/prove", {"goal": "T >= 2", "ranges": {"T": [2, 9]}})[0] == 200
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    errors = [(job[0], job[2], status) for job, status, _ in results if status != job[2]]
    ms = sorted(seconds * 1000 for _, _, seconds in results)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    by_status: dict = {}
    for _, status, _ in results:
        by_status[status] = by_status.get(status, 0) + 1
    print(f"requests: {len(results)} from {args.clients} clients in {wall:.1f} s ({len(results) / wall:.0f}/s)")
    print(f"statuses: {dict(sorted(by_status.items(), key=lambda kv: str(kv[0])))}")
    print(f"errors (unexpected status or dropped): {len(errors)}" + (f" e.g. {errors[:3]}" if errors else ""))
    print(f"latency ms: median {statistics.median(ms):.1f}, p99 {p99:.1f}, max {ms[-1]:.1f}")
    print(f"server still serving after the run: {alive}")
    return 0 if not errors and alive else 1


if __name__ == "__main__":
    sys.exit(main())
