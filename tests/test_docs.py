"""The documentation is tested: every code example of the docs site and the README runs here, and the
site builds in strict mode (a broken link, anchor or API reference fails), so the docs cannot drift
from the code.

Every fenced block carries a language, which says what happens to it:

* ``python``: run; a block with ``>>>`` prompts is a doctest (its output is compared), any other is
  executed.  The blocks of one page share one namespace, in order, like a doctest file, so a page
  can build a model once and use it in later examples.
* ``pycon``: a doctest.
* ``console``: ``$ shapeproof ...`` commands, run through the CLI; what follows each is its output.
* ``sh`` (commands that install or take minutes: the bench) and ``text`` (output shown, not
  produced here) are not run; they may not hide Python (a ``>>>`` prompt or an ``import``).

Output is compared with doctest's ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``, and times (``0.5 ms``,
``1.2 s``) match any time.  Examples run in a temporary folder, so the files they write go there.
"""
from __future__ import annotations

import contextlib
import doctest
import io
import re
import shlex
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted((DOCS / "pages").rglob("*.md")) + [ROOT / "README.md"]
RUN = {"python", "pycon", "console"}
SHOWN = {"sh", "text"}
FENCE = re.compile(r"^```(?P<lang>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
TIME = re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass
class Block:
    page: Path
    line: int            # of the block's first line of code in the page
    lang: str
    body: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start("body")) + 1, m["lang"].strip(), m["body"])
            for m in FENCE.finditer(text)]


class _AnyTime(doctest.OutputChecker):
    """Output matches when it differs only in the times it reports."""

    def check_output(self, want, got, optionflags):
        return super().check_output(TIME.sub("<time>", want), TIME.sub("<time>", got), optionflags)


def _doctest(block: Block, namespace: dict) -> int:
    test = doctest.DocTestParser().get_doctest(block.body, namespace, str(block), str(block.page),
                                               block.line - 1)
    test.globs = namespace            # DocTest copies the globals it is given: the page shares one namespace
    runner = doctest.DocTestRunner(checker=_AnyTime(), optionflags=FLAGS)
    out = io.StringIO()
    runner.run(test, out=out.write, clear_globs=False)
    assert runner.failures == 0, f"{block}:\n{out.getvalue()}"
    return runner.tries


def _execute(block: Block, namespace: dict) -> None:
    # line numbers in tracebacks and in shapeproof's messages are the page's own
    code = compile("\n" * (block.line - 1) + block.body, str(block.page), "exec")
    exec(code, namespace)


def _console(block: Block) -> int:
    """Run each ``$ shapeproof ...`` of the block through the CLI; returns how many ran."""
    from shapeproof.cli import main

    commands = re.split(r"^\$ ", block.body, flags=re.M)
    assert commands[0] == "", f"{block}: a console block starts with a '$ ' command"
    for command in commands[1:]:
        line, _, want = command.partition("\n")
        argv = shlex.split(line)
        assert argv[0] == "shapeproof", f"{block}: only shapeproof commands run here, not {argv[0]}"
        got = io.StringIO()
        with contextlib.redirect_stdout(got), contextlib.redirect_stderr(got):
            main(argv[1:])
        checker = _AnyTime()
        difference = checker.output_difference(doctest.Example(line, want), got.getvalue(), FLAGS)
        assert checker.check_output(want, got.getvalue(), FLAGS), f"{block}: $ {line}\n{difference}"
    return len(commands) - 1


def run_page(page: Path) -> int:
    """Run every example of ``page`` in order, in one namespace; returns how many examples ran."""
    from shapeproof.solver import STRATEGIES

    STRATEGIES["cascade"].clear_cache()     # a page shows what a fresh process prints, not "(cached)"
    # the page's namespace is a module's, importable by name while the page runs: dynamo imports the module
    # of the code it traces (torch's scan traces a rolled loop's body, guide/loops.md)
    module = types.ModuleType(f"docs_{page.stem}")
    sys.modules[module.__name__] = module
    namespace: dict = module.__dict__
    ran = 0
    try:
        for block in blocks(page):
            if block.lang == "console":
                count = _console(block)
            elif block.lang == "pycon" or (block.lang == "python"
                                           and re.search(r"^\s*>>> ", block.body, re.M)):
                count = _doctest(block, namespace)
            elif block.lang == "python":
                _execute(block, namespace)
                count = 1
            else:
                continue
            assert count > 0, f"{block}: a {block.lang} block with no example in it"
            ran += count
    finally:
        sys.modules.pop(module.__name__, None)
    return ran


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_of_the_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))          # pages may import the bench (a folder of scripts)
    run_page(page)


def test_every_block_says_what_it_is():
    wrong = [f"{b}: ```{b.lang}" for page in PAGES for b in blocks(page) if b.lang not in RUN | SHOWN]
    hidden = [str(b) for page in PAGES for b in blocks(page)
              if b.lang in SHOWN and re.search(r"^\s*(>>> |import |from \S+ import )", b.body, re.M)]
    assert not wrong, "blocks without a known language (python, pycon, console, sh, text):\n" + \
        "\n".join(wrong)
    assert not hidden, "Python shown in a block that does not run:\n" + "\n".join(hidden)


def test_the_site_builds_in_strict_mode(tmp_path):
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(DOCS / "mkdocs.yml"), "--site-dir", str(site)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    api = (site / "api" / "index.html").read_text()
    for documented in ("shapeproof.export", "suggest_dynamic_shapes", "ExportError", "prove",
                       "explain_guard", "SplitProgram"):
        assert documented in api, f"the API reference lost {documented}"
