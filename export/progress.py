"""A region search's progress on stderr (tqdm), when the caller asks for it.

Searches over models like Swin trace for minutes; ``shapeproof.export(...,
progress=True)`` (or ``SHAPEPROOF_PROGRESS=1`` in the environment, for code
that reaches export through ``shapeproof.engine()``) shows one bar of traces,
with the point traced and the programs found so far.  Off by default, like
torch.export, which prints nothing.
"""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["TraceProgress", "point_str", "wanted"]


def point_str(point: dict) -> str:
    """A traced point as messages print it: ``B=2, H=64, W=96``."""
    return ", ".join(f"{k}={v}" for k, v in point.items())


def wanted(progress: bool) -> bool:
    return progress or os.environ.get("SHAPEPROOF_PROGRESS", "") not in ("", "0")


class TraceProgress:
    """One bar per region search; every method does nothing when the bar is off."""

    def __init__(self, enabled: bool, total: int, desc: str = "shapeproof region search"):
        self.bar = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            warnings.warn("progress=True needs tqdm (pip install tqdm); searching without a progress bar",
                          stacklevel=3)
            return
        self.bar = tqdm(total=total, desc=desc, unit="trace", file=sys.stderr, dynamic_ncols=True)

    def traced(self, point: dict, programs: int, seconds: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"at {point_str(point)} ({seconds:.1f} s), {programs} program(s)")
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
