"""shapeproof.tracer.control — the user's control flow, read from source and changed: ``if``s on sizes
taken for every input, loops over a size rolled into one ``scan``, ``torch.cond``'s sides under their
conditions.

Owns: where a guard's ``if`` is and what its body may do (``branch_sites``, ``effects``), its test read
on the frame's values (``branch_tests``), the merge that takes its body for every input (``branch_merge``),
short-circuit ``and``/``or`` whose value nothing reads (``short_circuits``), views followed as index maps
(``view_maps``), and loops: their sites (``loop_sites``), the scan (``loops``), the locals it rebinds
(``frame_locals``) and loop operators' bodies (``loop_bodies``); each side of a ``torch.cond`` traced
under its condition (``cond``), and an ``if`` whose sides differ run as one (``branch_cond``).

May import: ``tracer.sizes``, the tracer's foundations (``torch_internals``, ``sympy_bridge``,
``patching``, ``user_source``) and the layers below through their facades; never the tracer's top
(``engine_env`` asks control, control does not ask it).
"""
