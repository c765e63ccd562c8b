"""shapeproof.tracer.sizes — sizes followed through the values they pass: small tensors, Python ints and
floats, ``range``, ``int()`` and ``math.sqrt`` of sizes, recurrent layers, and sizes without a hint.

Owns: the fake mode's tracker of small tensors' values (``size_tracking``, its op rules ``size_ops``, their
exact float steps ``size_values``) and the runtime asserts that check what it followed (``size_asserts``);
``range``/``int``/``math.sqrt`` of sizes in the user's code (``symbolic_range``, ``symbolic_casts``) and the
names that bring them to the user's modules (``user_globals``); recurrent ops' fake outputs
(``rnn_shapes``); torch's layout questions answered as for a size without a hint (``hintless``).

May import: the tracer's foundations (``torch_internals``, ``sympy_bridge``, ``patching``, ``user_source``)
and the layers below through their facades; never ``tracer.control`` or the tracer's top.
"""
