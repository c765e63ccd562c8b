"""Benchmarks: solver strategies, exports and the engine as a service, with reproducible tables."""
