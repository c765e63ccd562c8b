"""``pip install <checkout>`` in a fresh venv pulls no torch, and the torch-free commands work there.

The core's dependencies (sympy, z3-solver, networkx, numpy) come from pip as
for a user; export, which needs torch, says which extra installs it.
"""
import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what a wheel of the checkout does not contain (bench/, tests/ and docs/ are not packages of it)
NOT_PACKAGED = shutil.ignore_patterns(".git", ".venv", "__pycache__", "build", "*.egg-info", ".hypothesis",
                                      "bench", "tests", "docs")


def _run(*cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("torch_free")
    shutil.copytree(REPO, root / "src", ignore=NOT_PACKAGED)
    done = _run(sys.executable, "-m", "venv", root / "venv")
    assert done.returncode == 0, done.stderr
    bin_dir = root / "venv" / "bin"
    done = _run(bin_dir / "pip", "install", "-q", root / "src")
    assert done.returncode == 0, done.stderr[-3000:]
    return bin_dir


@pytest.mark.slow
def test_the_install_has_no_torch(venv):
    done = _run(venv / "python", "-c", "import torch")
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    installed = _run(venv / "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert "shapeproof" in names and "z3-solver" in names and "torch" not in names


@pytest.mark.slow
def test_prove_works_without_torch(venv):
    done = _run(venv / "shapeproof", "prove", "(T % 4) != 0", "--range", "T=2:9", "--json")
    assert done.returncode == 1, done.stderr           # refuted
    verdict = json.loads(done.stdout)
    assert verdict["status"] == "refuted" and verdict["counterexample"] == {"T": 4}


@pytest.mark.slow
def test_serve_works_without_torch(venv):
    server = subprocess.Popen([str(venv / "shapeproof"), "serve", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        banner = server.stdout.readline()              # "shapeproof service on http://127.0.0.1:PORT (...)"
        assert banner.startswith("shapeproof service on http://127.0.0.1:"), server.stderr.read()
        url = banner.split()[3]
        body = json.dumps({"goal": "(T % 4) != 0", "ranges": {"T": [2, 9]}}).encode()
        request = urllib.request.Request(f"{url}/prove", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
        assert answer["status"] == "refuted" and answer["counterexample"] == {"T": 4}
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_export_without_torch_names_the_extra(venv):
    done = _run(venv / "shapeproof", "export", "shapeproof.export.examples:example")
    assert done.returncode == 1
    assert 'pip install "shapeproof[torch]"' in done.stderr and "Traceback" not in done.stderr
    done = _run(venv / "python", "-c", "import shapeproof; shapeproof.export")
    assert 'TorchMissingError' in done.stderr and 'shapeproof[torch]' in done.stderr


def test_the_extra_in_pyproject_is_the_one_the_error_names():
    tomllib = pytest.importorskip("tomllib")
    from shapeproof.torch_extra import TORCH_REQUIREMENT

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["torch"] == [TORCH_REQUIREMENT]
    assert not any(d.replace(" ", "").startswith("torch") for d in project["dependencies"])


def test_export_without_torch_raises_an_import_error_naming_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"       # any 'import torch' now fails
            "import shapeproof\n"
            "try:\n    shapeproof.export\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    done = _run(sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TorchMissingError shapeproof.export needs PyTorch")
    assert 'pip install "shapeproof[torch]"' in done.stdout


@pytest.mark.slow
def test_the_report_templates_are_installed(venv):
    code = ("from shapeproof.shapes import ShapeEnv, Source\n"
            "from shapeproof.shapes.apps.html_report import render_html\n"
            "env = ShapeEnv()\n"
            "t = env.create_backed_symbol(8, Source('x.size(1)', 'x', 1), declared=(2, 64), dim_name='T')\n"
            "env.evaluate(f'({t} % 4) != 0')\n"
            "print(render_html(env, env.produce_guards(), title='<T>', exported=False))\n")
    done = _run(venv / "python", "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<title>&lt;T&gt;</title>" in done.stdout
    assert '<span class="chip">T = 2</span>' in done.stdout        # the guard is T % 4 == 0 (T was 8)


@pytest.mark.slow
def test_the_wheel_holds_every_subpackage_and_says_it_is_typed(venv):
    """The package list is found, not written out: every folder of a layer with an ``__init__.py`` is in the
    install (those without torch import there), with ``py.typed`` for the users' type checkers."""
    subpackages = sorted(".".join(["shapeproof", *p.parent.relative_to(REPO).parts])
                         for layer in ("solver", "shapes", "tracer", "export")
                         for p in (REPO / layer).rglob("__init__.py"))
    assert {"shapeproof.solver.language", "shapeproof.tracer.control", "shapeproof.export.search"} <= set(
        subpackages)
    code = ("import importlib, json, pathlib, shapeproof\n"
            f"names = {subpackages!r}\n"
            "root = pathlib.Path(shapeproof.__file__).parent\n"
            "found = {n: root.joinpath(*n.split('.')[1:], '__init__.py').exists() for n in names}\n"
            "typed = (root / 'py.typed').exists()\n"
            "torch_free = [n for n in names if n.split('.')[1] in ('solver', 'shapes')]\n"
            "for n in torch_free: importlib.import_module(n)\n"
            "print(json.dumps({'found': found, 'typed': typed, 'imported': torch_free}))\n")
    done = _run(venv / "python", "-c", code)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["typed"] and all(answer["found"].values()), answer["found"]
    assert "shapeproof.solver.strategies" in answer["imported"]
