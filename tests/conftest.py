"""Shared test configuration: make the helper modules in tests/ importable."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

try:
    from hypothesis import settings
except ImportError:   # the torch-free smoke run has no hypothesis
    settings = None
if settings is not None:
    # CI replays a fixed sample so that main stays green on its own; local runs keep
    # exploring new examples (that is how the round-trip printing bug was found).
    settings.register_profile("ci", derandomize=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


if settings is not None:     # torch is installed too (the torch-free smoke run stops above)
    import pytest

    @pytest.fixture
    def program_level_merges_only(monkeypatch):
        """Traces that never take a branch's body for every input (``tracer/control/branch_merge``) nor run
        it as a cond (``branch_cond``): a pad branch then reaches the region search, whose program-level
        merging (``export/programs/merge.py``) and widest-range search (``export/search/narrow.py``) serve
        the branches a trace cannot merge itself (an ``else``, a call of the user's code in the body)."""
        from shapeproof.tracer.control.branch_merge import BranchMerging
        from shapeproof.tracer.control.branch_cond import BranchConds
        monkeypatch.setattr(BranchMerging, "decide", lambda self, expr, frame: None)
        monkeypatch.setattr(BranchConds, "convert", lambda self, frame, expr=None, data=None: None)
