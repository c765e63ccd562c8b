"""The HTTP JSON service: right answers, concurrency, and hostile input answered with 4xx JSON."""
from __future__ import annotations

import http.client
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from shapeproof.shapes.service import ServiceLimits, make_server


@pytest.fixture(scope="module")
def server():
    srv = make_server("127.0.0.1", 0, ServiceLimits(max_timeout=3.0))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()


def call(port, method, path, body=None, raw: bytes | None = None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = json.loads(resp.read())
    conn.close()
    return resp.status, payload


def test_prove_explain_simplify(server):
    status, v = call(server, "POST", "/prove", {"goal": "(T % 4) != 0", "ranges": {"T": [2, 1024]}})
    assert status == 200 and v["status"] == "refuted" and v["counterexample"] == {"T": 4}
    status, v = call(server, "POST", "/prove", {"goal": "((2*T*T) // T) == 2*T", "ranges": {"T": [2, None]}})
    assert status == 200 and v["status"] == "proven"
    status, ex = call(server, "POST", "/explain", {"guard": "(H // 2) == (2*(H // 4))", "ranges": {"H": [8, 256]}})
    assert status == 200 and ex["status"] == "refuted" and ex["counterexample"]["H"] % 4 >= 2 and ex["fixes"]
    message = ("Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy the generated "
               "guard (L['x'].size()[1] % 4) != 0.")
    status, out = call(server, "POST", "/explain", {"message": message})
    assert status == 200 and out["guards"][0]["status"] == "refuted" and out["guards"][0]["counterexample"] == {"T": 4}
    status, s = call(server, "POST", "/simplify", {"expr": "(T + ((16 - T % 16) % 16)) // 16", "ranges": {"T": [1, None]}})
    assert status == 200 and s["simplified"] == "-((-T) // 16)"
    status, spec = call(server, "GET", "/openapi.json")
    assert status == 200 and set(spec["paths"]) >= {"/prove", "/explain", "/simplify"}


def test_concurrent_requests_all_answered(server):
    def one(i):
        return call(server, "POST", "/prove", {"goal": f"(T % {i % 7 + 2}) != 0", "ranges": {"T": [2, 500]}})

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(60)))
    assert all(status == 200 and v["status"] == "refuted" for status, v in results)


@pytest.mark.parametrize("body, raw, expected", [
    ({"goal": "__import__('os').system('true')"}, None, 400),
    ({"goal": "(" * 5000 + "T" + ")" * 5000}, None, 413),
    ({"goal": "(" * 2000 + "T" + ")" * 2000 + " > 0"}, None, 400),
    ({"goal": "T" + " + T" * 600 + " > 0", "ranges": {"T": [1, 9]}}, None, 200),
    ({"goal": 42}, None, 400),
    ({"goal": "T > 0", "ranges": {"T": [1, "x"]}}, None, 400),
    ({"goal": "T > 0", "ranges": {"__class__": [1, 2]}}, None, 200),
    ({"goal": "T > 0", "strategy": "eval"}, None, 400),
    ({"goal": "T > 0", "timeout": -1}, None, 400),
    ({"goal": "9" * 500 + " > T"}, None, 400),
    (None, b"{not json", 400),
    (None, b"[1, 2]", 400),
    (None, b"[" * 100000 + b"]" * 100000, 413),
    (None, b"x" * (10 * 1024 * 1024), 413),
])
def test_hostile_input_gets_json_4xx_within_the_time_limit(server, body, raw, expected):
    start = time.perf_counter()
    status, payload = call(server, "POST", "/prove", body, raw)
    assert status == expected, payload
    assert time.perf_counter() - start < 10
    if status >= 400:
        assert set(payload) >= {"error", "status"} and "Traceback" not in json.dumps(payload)
    assert call(server, "GET", "/health")[0] == 200


def test_unknown_paths_and_methods(server):
    assert call(server, "GET", "/nope")[0] == 404
    assert call(server, "POST", "/nope", {})[0] == 404
