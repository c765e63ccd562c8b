"""shapeproof.solver.language — the terms and conditions the solver reasons about, and what they mean.

Owns: the one table of node semantics (``nodes``: per node kind its Python, numpy, interval, Z3, torch,
text and guard-code meaning; 753 lines, kept whole because each row names its class and each class
reads its row), interval arithmetic for that table (``interval_math``), terms (``terms``), conditions
(``formula``), Python's value of both (``evaluate``), float sub-expressions as IEEE doubles
(``floats``), the safe parser (``parse``, with ``size``: the cost of expanding a term, bounded before
it is paid) and guard code (``guard_code``).

May import: nothing of shapeproof's (it is the bottom of every layer); sympy, numpy, z3.
"""
