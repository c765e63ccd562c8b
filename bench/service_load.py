"""Load the HTTP service with mixed, malformed and expensive requests; report errors, latency and memory.

    python -m bench.service_load [--requests 1000] [--clients 8] [--expensive 16] [--seconds 20]

It starts ``shapeproof serve`` in a subprocess on a free loopback port.

1. The mix: easy requests (prove true and false guards, explain a guard and
   a torch error message, simplify: each under 0.1 s of CPU alone), one
   moderate one (an explain that makes 52 solver calls), and malformed or hostile requests (bad JSON, wrong
   field types, NaN/Infinity/negative timeouts, empty ranges, 10 MB bodies)
   that must come back as 4xx JSON.  An *error* is any response whose status
   differs from the one expected for its request, a non-JSON body, or a
   dropped connection.
2. Under load: ``--expensive`` clients send ``((a+b+k)**16)**16 > 0`` with a
   1 s timeout in a loop (each holds a worker until it is killed) while
   ``--clients`` clients send the mix's easy requests; easy latency
   p50/p99, the expensive requests' slowest answer, and an idle connection
   (opened, nothing sent) that the server must close.  Before that, the
   same easy clients alone for half as long: the baseline on this machine.
3. Memory: resident memory of the server and all its worker processes (sum
   of RSS, and of PSS, which counts pages shared after fork once) at start,
   at the peak of phase 2, and after it (waiting up to 30 s for idle workers
   to be retired).  Linux ``/proc`` only.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MESSAGE = ("Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy the generated "
           "guard ((L['x'].size()[1] + ((16 + (-1)*(L['x'].size()[1] % 16)) % 16)) // 16) != 1.")

EASY = [  # (path, body, expected status)
    ("/prove", {"goal": "((2*T*T) // T) == 2*T", "ranges": {"T": [2, 4096]}}, 200),
    ("/prove", {"goal": "((1 + (L // 4)) % 8) != 0", "ranges": {"L": [2, 4096]}}, 200),
    ("/prove", {"goal": "(1 % (1 + ((L - 1) // S))) != 0", "ranges": {"L": [2, None], "S": [2, None]},
                "facts": ["L >= 2*S"]}, 200),
    ("/explain", {"guard": "(H // 2) == (2*(H // 4))", "ranges": {"H": [8, 256]}}, 200),
    ("/explain", {"message": MESSAGE}, 200),
    ("/simplify", {"expr": "(T + ((16 - T % 16) % 16)) // 16", "ranges": {"T": [1, None]}}, 200),
]
MODERATE = [  # 52 solver calls (the fixes search over [2, oo)): about 0.6 s of CPU alone
    ("/explain", {"guard": "(T % 4) != 0", "ranges": {"T": [2, None]}}, 200),
]
MALFORMED = [
    ("/prove", {"goal": "__import__('os').system('id')"}, 400),
    ("/prove", {"goal": "(" * 3000 + "T" + ")" * 3000}, 413),
    ("/prove", b"{not json", 400),
    ("/prove", {"goal": "T > 0", "strategy": "exec"}, 400),
    ("/prove", {"goal": "T > 0", "strategy": []}, 400),
    ("/prove", {"goal": "T > 0", "strategy": {}}, 400),
    ("/prove", b'{"goal": "T > 0", "timeout": NaN}', 400),
    ("/prove", b'{"goal": "T > 0", "timeout": Infinity}', 400),
    ("/prove", {"goal": "T > 0", "timeout": -1}, 400),
    ("/prove", {"goal": "T > 0", "timeout": "2"}, 400),
    ("/prove", {"goal": "T > 9", "ranges": {"T": [4096, 2]}}, 400),
    ("/prove", {"goal": "T > 0", "ranges": {"T": [1, 2.5]}}, 400),
    ("/prove", {"goal": "T > 0", "ranges": [1, 2]}, 400),
    ("/prove", {"goal": "T > 0", "facts": "T > 1"}, 400),
    ("/prove", {"goal": "T > 0", "facts": [1]}, 400),
    ("/prove", {"goal": ["T > 0"]}, 400),
    ("/prove", {"goal": "T > 0", "timout": 1}, 400),
    ("/explain", {"guard": "T > 0", "sources": ["x"]}, 400),
    ("/explain", {"guard": "T > 0", "sources": {"T": 5}}, 400),
    ("/explain", {"message": 5}, 400),
    ("/simplify", {"expr": None}, 400),
]
MIX = EASY + MODERATE + MALFORMED
HUGE = ("/prove", b"x" * (10 * 1024 * 1024), 413)
EXPENSIVE = ("/prove", {"goal": "((a+b+c+1)**8) % (a*b + 1) != 3",
                         "ranges": {"a": [2, 100000], "b": [2, 100000], "c": [2, 100000]}, "timeout": 1}, 200)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STOPPED = 0                                   # answers "stopped at the time limit", counted by request()


def request(host: str, port: int, path: str, body, timeout: float = 30) -> tuple[int | None, float]:
    global STOPPED
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        conn.close()
        if str(payload.get("reason", "")).startswith("stopped"):
            STOPPED += 1
        return resp.status, time.perf_counter() - start
    except (OSError, ValueError, http.client.HTTPException):
        return None, time.perf_counter() - start


# ---------------------------------------------------------------------------- memory (Linux /proc)

def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def memory_mb(pid: int) -> tuple[float, float, int]:
    """(sum of RSS, sum of PSS) in MB of ``pid`` and its descendants, and how many processes."""
    rss = pss = 0
    procs = _tree(pid)
    for p in procs:
        try:
            with open(f"/proc/{p}/statm") as f:
                rss += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
    return rss / 1e6, pss / 1e6, len(procs)


# ---------------------------------------------------------------------------- phases

def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def mixed(host, port, requests: int, clients: int) -> list:
    jobs = [MIX[i % len(MIX)] for i in range(requests - 5)] + [HUGE] * 5
    with ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(lambda job: (job, *request(host, port, job[0], job[1])), jobs))


def under_load(host, port, pid, expensive: int, clients: int, seconds: float) -> dict:
    stop = time.monotonic() + seconds
    easy, heavy, peak = [], [], [(0.0, 0.0, 0)]

    def loop(jobs, out):
        i = 0
        while time.monotonic() < stop:
            job = jobs[i % len(jobs)]
            out.append((job, *request(host, port, job[0], job[1])))
            i += 1

    def watch_memory():
        while time.monotonic() < stop:
            peak[0] = max(peak[0], memory_mb(pid))
            time.sleep(0.5)

    def idle_connection():
        start = time.monotonic()
        with socket.create_connection((host, port), timeout=60) as s:
            try:
                closed = s.recv(1) == b""
            except OSError:
                closed = True
        return closed, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=expensive + clients + 2) as pool:
        idle = pool.submit(idle_connection) if expensive else None
        for _ in range(expensive):
            pool.submit(loop, [EXPENSIVE], heavy)
        time.sleep(1.0 if expensive else 0)   # let every expensive request take its worker first
        for _ in range(clients):
            pool.submit(loop, EASY, easy)
        pool.submit(watch_memory)
    return {"easy": easy, "heavy": heavy, "peak": peak[0], "idle": idle.result() if idle else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--expensive", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)

    host, port = "127.0.0.1", _free_port()
    server = subprocess.Popen([sys.executable, "-m", "shapeproof", "serve", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection((host, port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1.0)                       # the workers start after the port opens
        for job in EASY:                      # the first requests
            request(host, port, job[0], job[1])
        time.sleep(12.0)                      # idle workers are replaced by fresh forks after 10 s
        mem_start = memory_mb(server.pid)
        start = time.perf_counter()
        results = mixed(host, port, args.requests, args.clients)
        wall = time.perf_counter() - start
        alone = under_load(host, port, server.pid, 0, args.clients, args.seconds / 2)
        stopped_before = STOPPED
        load = under_load(host, port, server.pid, args.expensive, args.clients, args.seconds)
        easy_stopped = STOPPED - stopped_before - len(load["heavy"])
        settle = time.monotonic()
        mem_after = memory_mb(server.pid)
        while abs(mem_after[1] - mem_start[1]) > 50 and time.monotonic() - settle < 30:
            time.sleep(1.0)
            mem_after = memory_mb(server.pid)
        settled = time.monotonic() - settle
        alive = request(host, port, "/prove", {"goal": "T >= 2", "ranges": {"T": [2, 9]}})[0] == 200
    finally:
        server.terminate()
        server.wait(timeout=10)

    everything = results + alone["easy"] + load["easy"] + load["heavy"]
    errors = [(job[0], job[2], status) for job, status, _ in everything if status != job[2]]
    five = sum(1 for _, status, _ in everything if status is not None and status >= 500)
    ms = [seconds * 1000 for _, _, seconds in results]
    by_status: dict = {}
    for _, status, _ in results:
        by_status[status] = by_status.get(status, 0) + 1
    easy_ms = [seconds * 1000 for _, _, seconds in load["easy"]]
    alone_ms = [seconds * 1000 for _, _, seconds in alone["easy"]]
    heavy_s = [seconds for _, _, seconds in load["heavy"]]
    closed, idle_s = load["idle"]
    print(f"mixed: {len(results)} requests ({len(MALFORMED)} malformed kinds) from {args.clients} clients in "
          f"{wall:.1f} s ({len(results) / wall:.0f}/s); statuses "
          f"{dict(sorted(by_status.items(), key=lambda kv: str(kv[0])))}")
    print(f"mixed latency ms: median {statistics.median(ms):.1f}, p99 {_pct(ms, 0.99):.1f}, "
          f"max {max(ms):.1f}")
    for kind, jobs in (("easy", EASY), ("moderate", MODERATE), ("malformed", MALFORMED + [HUGE])):
        some = [seconds * 1000 for job, _, seconds in results if job in jobs]
        print(f"  {kind}: {len(some)} requests, median {statistics.median(some):.1f} ms, max {max(some):.1f} "
              "ms")
    print()
    print(f"| under load ({args.expensive} expensive clients, {args.clients} easy, {args.seconds:g} s) | "
          "value |")
    print("| --- | --- |")
    print(f"| easy alone ({args.clients} clients, {args.seconds / 2:g} s): p50 / p99 / max | "
          f"{_pct(alone_ms, 0.5):.0f} ms / {_pct(alone_ms, 0.99):.0f} ms / {max(alone_ms):.0f} ms |")
    print(f"| easy requests answered | {len(easy_ms)} |")
    print(f"| easy p50 / p99 / max | {_pct(easy_ms, 0.5):.0f} ms / {_pct(easy_ms, 0.99):.0f} ms / "
          f"{max(easy_ms):.0f} ms |")
    slow = {}
    for job, _, seconds in load["easy"]:
        slow.setdefault(f"{job[0]} {str(job[1])[:24]}", []).append(seconds * 1000)
    for name, values in sorted(slow.items()):
        print(f"| easy {name}: n / p50 / p99 | {len(values)} / {_pct(values, 0.5):.0f} ms / "
              f"{_pct(values, 0.99):.0f} ms |")
    print(f"| easy answered *unknown* (stopped at the time limit) | {max(0, easy_stopped)} |")
    print(f"| expensive requests answered (timeout 1 s) | {len(heavy_s)}, slowest {max(heavy_s):.2f} s |")
    print(f"| idle connection closed by the server | {closed} after {idle_s:.1f} s |")
    print(f"| memory RSS / PSS at start | {mem_start[0]:.0f} MB / {mem_start[1]:.0f} MB ({mem_start[2]} "
          "processes) |")
    print(f"| memory RSS / PSS at peak | {load['peak'][0]:.0f} MB / {load['peak'][1]:.0f} MB "
          f"({load['peak'][2]} processes) |")
    print(f"| memory RSS / PSS after | {mem_after[0]:.0f} MB / {mem_after[1]:.0f} MB ({mem_after[2]} "
          f"processes, {settled:.0f} s after the load) |")
    print(f"| 5xx responses | {five} |")
    print(f"| unexpected status or dropped | {len(errors)}" + (f" e.g. {errors[:3]}" if errors else "")
          + " |")
    print(f"| server still serving after the run | {alive} |")
    ok = (not errors and alive and five == 0 and closed and _pct(easy_ms, 0.99) <= 1000
          and mem_after[0] - mem_start[0] <= 50)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
