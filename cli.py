"""The ``shapeproof`` command line: prove, explain, export, report, serve.

    shapeproof prove "((1 + (L // 4)) % 8) != 0" --range L=2:4096
    shapeproof explain torch_error.log          (or the message text, or - for stdin)
    shapeproof export my_models:build --save model.pt2 --report report.html
    shapeproof report bench/models.py:wavlm -o report.html
    shapeproof serve --port 8000

Exit codes: 0 proven / exported, 1 refuted, unknown or failed, 2 bad input.
A thin dispatcher: ``prove``, ``explain`` and ``serve`` never import torch.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import sys
from pathlib import Path

__all__ = ["main", "parse_range"]

OK, FAILED, BAD_INPUT = 0, 1, 2
_TEXT_COMMANDS = ("prove", "explain")       # input is only text: no traceback is the user's business


class BadInput(Exception):
    pass


def parse_range(text: str) -> tuple[str, tuple]:
    """``L=2:4096`` -> ``("L", (2, 4096))``; ``L=2:`` is unbounded above, ``S=2`` means exactly 2."""
    from shapeproof.shapes.inputs import InputError, check_name, check_span, parse_int

    name, sep, span = text.partition("=")
    try:
        if not sep:
            raise InputError("use NAME=LO:HI, NAME=LO: or NAME=VALUE")
        check_name(name)
        if ":" in span:
            lo, hi = span.split(":", 1)
            bounds = (parse_int(lo) if lo.strip() else None, parse_int(hi) if hi.strip() else None)
        else:
            bounds = (parse_int(span),) * 2
        return name, check_span(name, *bounds)
    except InputError as exc:
        raise BadInput(f"bad --range {text[:80]!r}: {exc}") from None


def _seconds(text: str) -> float:
    """argparse type of ``--timeout``: finite and positive (``-1``, ``nan`` and ``inf`` are refused)."""
    from shapeproof.shapes.inputs import InputError, check_seconds

    try:
        if not text.isascii():               # float() also reads non-ASCII digits
            raise InputError(f"{text!r} is not a number (ASCII digits)")
        return check_seconds(float(text))
    except ValueError as exc:                # InputError is one
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check_strategy(name: str) -> None:
    from shapeproof.solver.api import STRATEGIES

    if name not in STRATEGIES:
        raise BadInput(f"unknown strategy {name!r}: one of {', '.join(sorted(STRATEGIES))}")


# ---------------------------------------------------------------------------- prove / explain

def cmd_prove(args) -> int:
    from shapeproof.solver import ParseError, prove

    _check_strategy(args.strategy)
    ranges = dict(parse_range(r) for r in args.range)
    try:
        v = prove(args.guard, ranges=ranges, facts=args.fact, strategy=args.strategy, timeout=args.timeout)
    except (ParseError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    if args.json:
        print(json.dumps({"status": v.status.value, "counterexample": v.counterexample,
                          "strategy": v.strategy, "seconds": v.seconds, "reason": v.reason}))
    else:
        print(f"{v.status.value}: {args.guard}")
        if v.counterexample:
            print("  counterexample: " + ", ".join(f"{k} = {x}" for k, x in v.counterexample.items()))
        print(f"  by {v.strategy} in {v.seconds * 1000:.1f} ms: {v.reason}")
    return OK if v.proven else FAILED


def _read_texts(source: str) -> list[str]:
    """The messages to explain: stdin for ``-``, a file's content for a path, else the argument itself.

    A ``.jsonl`` file holds one message per line (``{"message": ...}``); each
    is read on its own, since Dim names repeat across messages.
    """
    if source == "-":
        return [sys.stdin.read()]
    path = Path(source) if len(source) < 4096 and "\n" not in source else None
    if path is not None and _is_file(path):
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise BadInput(f"cannot read {source}: {exc.strerror or exc}") from None
        return _jsonl_messages(source, text) if path.suffix == ".jsonl" else [text]
    if path is not None and path.suffix in (".log", ".txt", ".jsonl", ".json"):
        raise BadInput(f"no such file: {source}")
    return [source]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:             # a message too long for a file name (ENAMETOOLONG) is no file
        return False


def _jsonl_messages(source: str, text: str) -> list[str]:
    messages = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("message"), str):
            raise BadInput(f"{source}:{number}: expected a JSON object whose 'message' is a string")
        messages.append(record["message"])
    return messages


def cmd_explain(args) -> int:
    from shapeproof.shapes.apps.torch_messages import explain_torch_error

    _check_strategy(args.strategy)
    results = [pair for text in _read_texts(args.source)
               for pair in explain_torch_error(text, strategy=args.strategy, timeout=args.timeout)]
    if not results:
        print("no guard found in the text (expected torch.export's constraint-violation or data-dependent "
              "messages)", file=sys.stderr)
        return BAD_INPUT
    if args.json:
        print(json.dumps([{"guard": found.guard, "kind": found.kind, **ex.to_dict()}
                          for found, ex in results]))
    else:
        for found, ex in results:
            print(f"from torch: {found.line[:200]}")
            print(ex.text, end="\n\n")
        counts = {s: sum(ex.status == s for _, ex in results) for s in ("proven", "refuted", "unknown")}
        print(f"{len(results)} guard(s): {counts['proven']} hold for every value in range, "
              f"{counts['refuted']} fail (counterexample above), {counts['unknown']} undecided")
    return OK if all(ex.status == "proven" for _, ex in results) else FAILED


# ---------------------------------------------------------------------------- export / report

def load_factory(spec: str):
    """``module:factory`` or ``path/file.py:name`` -> ``(model, args, dynamic_shapes)``.

    In a file with a ``CASES`` registry (the format of ``bench/models.py``),
    ``name`` is a case and its ``build()`` is called; otherwise ``name`` is a
    function returning the triple.
    """
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise BadInput(f"bad model {spec!r}: use module:factory or path/to/file.py:name")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise BadInput(f"no such file: {target}")
            module_spec = importlib.util.spec_from_file_location(f"_shapeproof_cli_{path.stem}", path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ImportError as exc:
        raise BadInput(f"cannot import {target}: {exc}") from None
    cases = getattr(module, "CASES", None)
    if isinstance(cases, dict) and name in cases:
        built = cases[name].build()
    elif callable(getattr(module, name, None)):
        built = getattr(module, name)()
    else:
        raise BadInput(f"{target} has no case or factory named {name!r}")
    if not (isinstance(built, tuple) and len(built) == 3):
        raise BadInput(f"{spec} must return (model, args, dynamic_shapes)")
    return built


def _export(args):
    from shapeproof.torch_extra import require_torch

    # before the model's module: its own `import torch` would fail first
    require_torch("shapeproof export")
    import shapeproof

    if args.strategy != "torch":          # torch's own reasoning, which the tracer adds
        _check_strategy(args.strategy)
    for path in (args.save, args.report):
        if path is not None and (path.is_dir() or not path.parent.is_dir()):
            raise BadInput(f"cannot write {path}: " + ("a directory" if path.is_dir() else
                                                       f"no directory {path.parent}"))
    model, inputs, spec = load_factory(args.model)
    try:
        return shapeproof.export_with_report(model, inputs, dynamic_shapes=spec, strategy=args.strategy,
                                             split=args.split), None
    except shapeproof.ExportError as err:
        return None, err


def cmd_export(args) -> int:
    from shapeproof.export.summary import program_summary

    result, error = _export(args)
    if error is not None:
        print(error, file=sys.stderr)
        outcome = error
    else:
        program = result.program
        if hasattr(program, "predicates"):
            print(f"SplitProgram with {len(program.programs)} region(s):")
            for pred, member in zip(program.predicates, program.programs):
                print(f"  region {pred}:\n"
                      + "\n".join("    " + line for line in program_summary(member).splitlines()))
        else:
            print(program_summary(program))
        print(f"\nexported in {result.seconds:.1f} s; {len(result.discharged)} guard(s) discharged by the "
              "engine")
        for warning in result.warnings:
            print(f"note: {warning}")
        if args.save:
            with _writing(args.save):
                if hasattr(program, "save"):
                    program.save(args.save)
                else:
                    import torch

                    torch.export.save(program, args.save)
            print(f"saved {args.save}")
        outcome = result
    if args.report:
        from shapeproof.export.html import write_report

        with _writing(args.report):
            written = write_report(outcome, args.report)
        print(f"report: {written}")
    return OK if error is None else FAILED


@contextlib.contextmanager
def _writing(path: Path):
    """Failing to write ``path`` (torch raises RuntimeError for its own files) is bad input."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        raise BadInput(f"cannot write {path}: {exc}") from None


def cmd_report(args) -> int:
    args.save, args.report = None, args.output
    return cmd_export(args)


def cmd_serve(args) -> int:
    from shapeproof.shapes.apps.service import serve

    try:
        serve(args.host, args.port)
    except OSError as exc:                 # the address is taken, or not this machine's
        raise BadInput(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return OK


def _port(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 <= int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return int(text)


# ---------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shapeproof", description=__doc__.splitlines()[0],
                                     epilog="exit codes: 0 proven/exported, 1 refuted/unknown/failed, 2 bad "
                                     "input")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prove", help="prove or refute a guard over ranges (exit 1 when refuted or unknown)")
    p.add_argument("guard")
    p.add_argument("--range", action="append", default=[], metavar="NAME=LO:HI")
    p.add_argument("--fact", action="append", default=[], help="a condition assumed true (repeatable)")
    p.add_argument("--strategy", default="cascade")
    p.add_argument("--timeout", type=_seconds, default=2.0, help="seconds per solver call")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_prove)

    p = sub.add_parser("explain",
                       help="explain every guard in torch.export's error text, a log file, or - (stdin)")
    p.add_argument("source")
    p.add_argument("--strategy", default="cascade")
    p.add_argument("--timeout", type=_seconds, default=2.0, help="seconds per solver call")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_explain)

    for name, helptext in (("export", "export a model given as module:factory or file.py:case"),
                           ("report", "write the HTML report of an export (or of its failure)")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("model", metavar="module:factory")
        p.add_argument("--strategy", default="cascade")
        p.add_argument("--split", action="store_true",
                       help="export one program per region of shape-dependent code")
        if name == "export":
            p.add_argument("--save", type=Path)
            p.add_argument("--report", type=Path)
            p.set_defaults(run=cmd_export)
        else:
            p.add_argument("-o", "--output", type=Path, default=Path("shapeproof_report.html"))
            p.set_defaults(run=cmd_report)

    p = sub.add_parser("serve", help="HTTP JSON service: /prove /explain /simplify /openapi.json")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=8000)
    p.set_defaults(run=cmd_serve)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:            # argparse's own usage errors are bad input
        return BAD_INPUT if exc.code else OK
    try:
        return args.run(args)
    except BadInput as exc:
        print(f"shapeproof: {exc}", file=sys.stderr)
        return BAD_INPUT
    except ImportError as exc:
        from shapeproof.torch_extra import TorchMissingError

        if not isinstance(exc, TorchMissingError):
            raise
        print(f"shapeproof: {exc}", file=sys.stderr)
        return FAILED
    except Exception as exc:
        if args.command not in _TEXT_COMMANDS:
            raise                            # a model's own error: its traceback is the user's to read
        print(f"shapeproof: internal error ({type(exc).__name__}: {str(exc)[:200]}); please report it with "
              "the command line", file=sys.stderr)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
