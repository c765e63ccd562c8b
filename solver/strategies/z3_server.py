"""Answers Z3 questions in a process of its own (``z3_process`` starts it), so the caller can end it.

Z3 does not stop on time inside some of its arithmetic (a sum of 199 floor divisions took 7 s under a
0.5 s timeout, and an interrupt from another thread did not stop it either).  A process can be killed.

It runs as a script (``python -I z3_server.py Z3_DIR``), imports nothing but the standard library and
``z3`` (from ``Z3_DIR`` if it is not installed where ``-I`` looks), and reads one JSON request a line on
stdin: ``{"id": ..., "smt2": ..., "timeout_ms": ..., "rlimit": ..., "logic": ..., "names": [...]}``; it
writes one JSON answer a line: ``{"id": ..., "result": "sat" | "unsat" | "unknown", "reason": ...,
"model": {name: int}}``.
It first writes ``ready``, and it ends when its parent does.
"""
import json
import os
import signal
import sys
import threading
import time


def _end_with_parent() -> None:
    """End this process when its parent ends, even inside a long ``check``: on Linux the kernel does it;
    elsewhere a thread watches the parent's id."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _answer(z3, ctx, request: dict) -> dict:
    logic = request.get("logic")
    solver = z3.SolverFor(logic, ctx=ctx) if logic else z3.Solver(ctx=ctx)
    solver.set("timeout", int(request["timeout_ms"]))
    solver.set("rlimit", int(request["rlimit"]))
    solver.from_string(request["smt2"])
    result = solver.check()
    if result == z3.sat:
        model = solver.model()
        values = {name: model.eval(z3.Int(name, ctx), model_completion=True).as_long()
                  for name in request["names"]}
        return {"result": "sat", "reason": "", "model": values}
    if result == z3.unsat:
        return {"result": "unsat", "reason": "", "model": {}}
    return {"result": "unknown", "reason": solver.reason_unknown(), "model": {}}


def main() -> None:
    _end_with_parent()
    if len(sys.argv) > 1:
        sys.path.append(sys.argv[1])
    import z3
    # a fresh context for every question (learned state and the cumulative rlimit stay with a context, and
    # verdicts must not depend on the questions before them), made while waiting for the next one
    ctx = z3.Context()
    print("ready", flush=True)
    for line in sys.stdin:
        request: dict = {}
        try:
            request = json.loads(line)
            answer = _answer(z3, ctx, request)
        except Exception as exc:        # a bad request must not end the process that serves the next
            answer = {"result": "unknown", "reason": f"{type(exc).__name__}: {exc}", "model": {}}
        print(json.dumps({"id": request.get("id"), **answer}), flush=True)
        ctx = z3.Context()


if __name__ == "__main__":
    main()
