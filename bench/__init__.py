"""Benchmarks: solver strategies, exports and the engine as a service, with reproducible tables."""
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
"""The reference corpus every bench reads by default: export cases, guards with ground truth,
torch's error texts (``bench/corpus/README.md`` says where each came from)."""
