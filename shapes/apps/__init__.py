"""shapeproof.shapes.apps — applications built on the shape environment, torch-free like it.

* the HTTP JSON service (``service``: the server; ``endpoints``: each request
  checked and run; ``workers``: the processes that run them, stopped at their
  deadline; ``service_warm``: what the fork server imports once; ``openapi.json``);
* the HTML report of an export's shape decisions (``html_report``, Jinja
  templates in ``templates/``), which ``shapeproof.export.html`` writes;
* the reader of torch's own error texts (``torch_messages``), behind
  ``shapeproof explain`` and the service's ``/explain``.

They use the environment only through the ``shapeproof.shapes`` facade, and
the environment imports none of them (``tests/test_layers.py`` checks).  This
namespace is their facade for the layers above (``export`` renders the report).
"""
from .html_report import render_html
from .service import ServiceLimits, make_server, serve
from .torch_messages import explain_messages, explain_torch_error, find_guards

__all__ = ["render_html", "ServiceLimits", "make_server", "serve", "explain_messages", "explain_torch_error",
           "find_guards"]
