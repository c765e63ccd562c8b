"""Where a decision came from: the user's source line and the operation running there.

Explanations lead with what the user controls, so every guard, runtime
assert and unbacked symbol carries the innermost stack frame that belongs to
the user's code (not to torch, shapeproof or the standard library), plus the
name of the operation being traced when the question was asked.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass, field

__all__ = ["Frame", "Provenance", "capture", "is_user_frame", "is_user_file"]

_LIBRARY_ROOTS = tuple(
    os.path.normcase(os.path.abspath(p)) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
              sysconfig.get_paths()["platlib"]}
)
_PACKAGE_ROOT = os.path.normcase(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The engine's own layers; tests, benchmarks and bundled example models count as user code.
_ENGINE_ROOTS = tuple(os.path.join(_PACKAGE_ROOT, layer) + os.sep
                      for layer in ("solver", "shapes", "tracer", "export"))
# Library code that users write models with still counts as "theirs" when it is a model definition,
# what users read: transformers' modeling files, and the ``models`` packages of torchvision, timm,
# torchaudio, diffusers and the like (never torch's own).
_TRANSFORMERS = "transformers" + os.sep


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    function: str
    code: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}: {self.code}"

    @property
    def short(self) -> str:
        return f"{os.path.basename(self.filename)}:{self.lineno}"


@dataclass(frozen=True)
class Provenance:
    """The user frame (innermost first) and the op that asked, e.g. ``aten.view.default``."""

    frame: Frame | None = None
    op: str | None = None
    stack: tuple[Frame, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        parts = []
        if self.frame is not None:
            parts.append(f"{self.frame.short} ({self.frame.function}): {self.frame.code}")
        if self.op:
            parts.append(f"in {self.op}")
        return " ".join(parts) or "unknown location"

    def to_dict(self) -> dict:
        f = self.frame
        return {
            "file": f.filename if f else None, "line": f.lineno if f else None,
            "function": f.function if f else None, "code": f.code if f else None, "op": self.op,
        }


@functools.lru_cache(maxsize=4096)    # asked for every frame of every question: ~85 frames deep in a trace
def _is_user_file(filename: str) -> bool:
    path = os.path.normcase(os.path.abspath(filename))
    if filename.startswith("<") and not filename.startswith("<doctest"):
        return False
    if path.startswith(_ENGINE_ROOTS):
        return False
    if any(path.startswith(root) for root in _LIBRARY_ROOTS):
        rest = next(path[len(root):] for root in _LIBRARY_ROOTS if path.startswith(root))
        return _is_model_definition(rest)
    return True


def _is_model_definition(library_path: str) -> bool:
    """Whether a file inside site-packages (``library_path`` relative to it) defines models."""
    parts = library_path.split(os.sep)
    package, folders = parts[0], parts[1:-1]
    if package == "transformers":
        return os.sep + "modeling" in os.sep + library_path
    return package != "torch" and "models" in folders


def is_user_file(filename: str) -> bool:
    """Does ``filename`` hold the user's code (see ``capture``)?"""
    return _is_user_file(filename)


def is_user_frame(frame) -> bool:
    """Does ``frame`` run the user's code (see ``capture``)?"""
    return bool(frame.f_globals.get("__shapeproof_user_code__")) or _is_user_file(frame.f_code.co_filename)


def capture(op: str | None = None, depth: int = 6, start=None) -> Provenance:
    """Provenance of the current call: the innermost ``depth`` user frames.

    A module inside the engine's folders can declare itself user code with
    ``__shapeproof_user_code__ = True`` (the bundled example models do).
    """
    frame = start if start is not None else sys._getframe(1)
    frames: list[Frame] = []
    while frame is not None and len(frames) < depth:
        filename = frame.f_code.co_filename
        if is_user_frame(frame):
            code = linecache.getline(filename, frame.f_lineno).strip()
            frames.append(Frame(filename, frame.f_lineno, frame.f_code.co_name, code))
        frame = frame.f_back
    return Provenance(frames[0] if frames else None, op, tuple(frames))
