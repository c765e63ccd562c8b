"""shapeproof.export.programs — exported programs read as terms, and whether one serves another's region.

Owns: a program's integers and shapes as terms over the canonical input variables (``program_terms``),
the exact identities of ATen ops (``identities``) and the merge that proves one trace's program computes
another's function on that trace's region (``merge``).

May import: the export layer's foundations (``specs``, ``progress``) and the layers below; never
``export.search`` or the export layer's top.
"""
