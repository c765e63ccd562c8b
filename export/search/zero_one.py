"""An example of size 0 or 1 does not decide the program (issue 54).

torch.export makes a dim declared dynamic (a named ``Dim``, ``Dim.AUTO``,
``Dim.DYNAMIC``) a constant where its example is 0 or 1: a batch-1 example
fails with "specialized it to be a constant (1)", or under ``Dim.AUTO``
gives a program that accepts batch 1 only.  The model usually runs at every
size; the example is only where torch looked.  So the export traces at
another point of the declared range (``moved_off_zero_one``: the smallest
size from 2 up that no other dim of the example has, so that torch's duck
sizing relates nothing new; one size per named ``Dim``), with the example's
values repeated along the dim (zeros where it is 0), and then checks the
program at the example itself (``disagreement``): run there, it must accept
it and give what the model gives, shapes and values.  Where it does not (a
``squeeze``, a branch on ``size == 1`` that a cond could not take), the
export is made at the example as torch makes it, with a note saying why.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from shapeproof.tracer.engine_env import ZeroOneExample, readable_source
from shapeproof.tracer.torch_internals import pytree

from .inputs import inputs_at

__all__ = ["Moved", "moved_off_zero_one", "disagreement"]


@dataclass(frozen=True)
class Moved:
    """The call at which the export traces instead of the example, and what it says about it."""

    args: tuple
    kwargs: dict
    sizes: dict[str, int]                # torch's source name -> the size traced
    examples: dict[str, ZeroOneExample]  # torch's source name -> the example's 0/1

    @property
    def lowest(self) -> dict[str, int]:
        """The example's sizes, which the trace elsewhere takes into account (``EngineShapeEnv.lowest``)."""
        return {name: example.size for name, example in self.examples.items()}

    def _at(self, sizes) -> str:
        return ", ".join(f"{_label(name, self.examples[name])} = {sizes[name]}" for name in self.sizes)

    @property
    def note(self) -> str:
        example = self.lowest
        return (f"traced at {self._at(self.sizes)}, not at the example's {self._at(example)} (which "
                f"torch.export makes a constant); the program was checked at {self._at(example)}")

    def failed_note(self, why: str) -> str:
        example = self.lowest
        return (f"traced at {self._at(self.sizes)} so that the example's {self._at(example)} would not "
                f"decide the program, but that program does not serve the example ({why}): traced at the "
                f"example, as torch.export does")


def _label(name: str, example: ZeroOneExample) -> str:
    return example.dim_name or readable_source(name)[0]


def moved_off_zero_one(model, args: tuple, kwargs: dict | None,
                       examples: dict[str, ZeroOneExample]) -> Moved | None:
    """The call with every dim of ``examples`` moved to a size of its declared range from 2 up (None when
    there is none to move, a declared range does not hold its example, or holds no such size)."""
    if not examples:
        return None
    taken = {n for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)
             for n in leaf.shape}
    by_dim: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for name, example in examples.items():
        if example.dim_name is not None and example.dim_name in by_dim:
            sizes[name] = by_dim[example.dim_name]
            continue
        lo, hi = example.declared or (None, None)
        if lo is not None and lo > example.size:
            return None              # the example is outside its own declared range: torch's error says so
        size = max(2, lo or 2)
        while size in taken and (hi is None or size < hi):
            size += 1
        if hi is not None and size > hi:
            return None
        taken.add(size)
        sizes[name] = size
        if example.dim_name is not None:
            by_dim[example.dim_name] = size
    moved_args, moved_kwargs = inputs_at(model, args, kwargs, sizes, resized=_repeated)
    return Moved(moved_args, moved_kwargs, sizes, dict(examples))


def _repeated(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """``tensor`` grown to ``shape`` with its values repeated along the dims of size 1 (zeros where a dim
    was 0): a model that reads the example's values reads the same ones."""
    if tensor.numel() == 0:
        return torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    return tensor.detach().expand(shape).clone().requires_grad_(tensor.requires_grad)


def disagreement(program, model, args: tuple, kwargs: dict | None) -> str | None:
    """None where ``program`` run at the example gives what ``model`` gives there (shapes and values), else
    what differs.  Run without grad, on the random state the call found (put back after)."""
    kwargs = kwargs or {}
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        state = torch.get_rng_state()
        try:
            expected = model(*args, **kwargs)
        except Exception:  # noqa: BLE001  (the model itself fails at its example: nothing to compare)
            return None
        torch.set_rng_state(state)
        try:
            module = program.module()
            got = module(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001  (a rejected example is a disagreement, said so)
            return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
    ours, theirs = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    if len(ours) != len(theirs):
        return f"it gives {len(ours)} outputs where the model gives {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape:
                shape = tuple(getattr(a, "shape", ()))
                return f"output {i} has shape {shape} where the model's is {tuple(b.shape)}"
            if not torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5, equal_nan=True):
                return f"output {i} differs from the model's"
        elif a != b:
            return f"output {i} is {a!r} where the model's is {b!r}"
    return None
