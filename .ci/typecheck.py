"""Type-check shapeproof with mypy (settings in pyproject.toml, ``[tool.mypy]``).

The repository root is the ``shapeproof`` package (``package-dir`` in
pyproject.toml), which mypy cannot map from a checkout whose folder has
another name, and it does not follow the editable install's import hook.  So
the check runs on a link named ``shapeproof`` to this checkout, in a temporary
folder.  Usage: ``python .ci/typecheck.py`` (from any directory).
"""
import os
import sys
import tempfile
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(ROOT, Path(tmp) / "shapeproof")
        os.chdir(tmp)
        out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                    "--cache-dir", str(ROOT / ".mypy_cache")])
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


if __name__ == "__main__":
    sys.exit(main())
