"""A two-model registry in bench's format, small enough to run the bench's executors in a test.

``pad_to_multiple`` is rejected by torch.export 2.13 and exported by
shapeproof; ``even_batch`` has a guard that really fails (B = 3), so both
exporters fail on it.  The models are export_cases'; bench loads this file by
path in subprocesses, so it puts its own folder on ``sys.path``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_cases import CASES as EXPORT_CASES, even_batch  # noqa: E402


@dataclass
class Case:
    name: str
    group: str
    pattern: str
    build: Callable[[], tuple]
    alt_dims: list | None = None


CASES = {"pad_to_multiple": Case("pad_to_multiple", "hand", "pad to a multiple of 4, reshape",
                                 next(c for c in EXPORT_CASES if c.name == "pad_to_multiple").build),
         "even_batch": Case("even_batch", "hand", "view(B // 2, ...) with odd B in range",
                            even_batch)}
