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
