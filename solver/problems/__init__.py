"""shapeproof.solver.problems — a question in normal form and what every strategy knows about one.

Owns: the question (``problem``: goal, facts and ranges, with exact float sub-expressions made integer by
``exact_floats``), its budget (``deadline``), its answer (``verdict``) and the interface a strategy
implements (``strategy``); value ranges of terms with float enclosures (``bounds``) and what they say of
a box (``ranges``); the normal form (``rules``, ``normalize``, ``tight``) and what a fact teaches
(``classify``); a small cache strategies share (``recent``).

May import: ``solver.language``; never ``solver.strategies`` or the solver's top.
"""
