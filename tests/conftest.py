"""Shared test configuration: make the helper modules in tests/ importable."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
