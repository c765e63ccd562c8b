"""shapeproof.export.search — the region search: tracing again at counterexamples until the declared
ranges are covered, and what it hands back.

Owns: one trace and what it says (``traces``), the inputs at a point (``inputs``), a region's predicate
as input checks (``checks``), the search itself (``regions``; traces side by side in ``trace_pool``), the
widest range one program serves (``narrow``), what share of the declared sizes a program accepts
(``acceptance``) and the split program with its archive (``split``, ``package``).

May import: ``export.programs``, the export layer's foundations (``specs``, ``progress``) and the layers
below; never the export layer's top (``api``, ``errors``, ``switch``, ...).
"""
