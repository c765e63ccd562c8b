"""shapeproof.solver.strategies — the decision procedures behind ``Strategy``: prove, refute with a model,
or say unknown.

Owns: ``interval`` (value ranges alone), ``rewrite`` (the normal form), ``enumerate`` (the whole box in
numpy), ``probe`` (a few telling points), ``pieces`` (value ranges over parts of a large box),
``weaken`` (easier questions that settle a float one), ``smt`` (Z3 in a worker process, ``z3_process``
and ``z3_server``; float chains relaxed linearly by ``relax``) and ``cascade``, which runs them in turn.

May import: ``solver.problems`` and ``solver.language``; never the solver's top (``solver``, ``api``).
"""
