"""Brute-force ground truth for solver tests: check every point of a small box."""
from __future__ import annotations

import itertools

from shapeproof.solver.language.evaluate import truth
from shapeproof.solver.problems.problem import Problem


def brute_force(problem: Problem):
    """(holds everywhere, first counterexample or None) by exhaustive evaluation."""
    ranges = [problem.ranges[s] for s in problem.symbols]
    assert all(lo is not None and hi is not None for lo, hi in ranges), "brute force needs a bounded box"
    for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges)):
        env = dict(zip(problem.symbols, combo))
        memo: dict = {}
        if all(truth(f, env, memo) is True
               for f in problem.facts) and truth(problem.goal, env, memo) is not True:
            return False, {s.name: v for s, v in env.items()}
    return True, None
