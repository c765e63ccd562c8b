"""The engine layers must import and work where torch is not installed."""
import subprocess
import sys

CODE = """
import sys
sys.modules['torch'] = None          # any 'import torch' now raises ImportError
import shapeproof.solver, shapeproof.shapes
import shapeproof.shapes.apps.html_report, shapeproof.shapes.querylog
import shapeproof.shapes.apps.service, shapeproof.shapes.apps.endpoints, shapeproof.shapes.apps.workers
from shapeproof.solver import prove
assert prove('(T % 4) != 0', ranges={'T': (2, 9)}).counterexample == {'T': 4}
assert not any(m == 'torch' or m.startswith('torch.') for m, v in sys.modules.items() if v is not None)
print('ok')
"""


def test_solver_and_shapes_import_without_torch():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
