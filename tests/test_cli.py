"""The ``shapeproof`` command line, run in-process: output and exit codes."""
from __future__ import annotations

import json
from pathlib import Path

from shapeproof.cli import main, parse_range

MODELS = Path(__file__).with_name("cli_models.py")
MESSAGE = ("Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy the generated "
           "guard (L['x'].size()[1] % 4) != 0.")


def test_ranges():
    assert parse_range("L=2:4096") == ("L", (2, 4096))
    assert parse_range("L=2:") == ("L", (2, None))
    assert parse_range("S=2") == ("S", (2, 2))


def test_prove_exit_codes(capsys):
    assert main(["prove", "((2*T*T)//T) == 2*T", "--range", "T=2:"]) == 0
    assert "proven" in capsys.readouterr().out
    assert main(["prove", "((1 + (L // 4)) % 8) != 0", "--range", "L=2:4096", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "refuted" and (1 + out["counterexample"]["L"] // 4) % 8 == 0
    assert main(["prove", "T %% 4", "--range", "T=2:9"]) == 2
    assert "position" in capsys.readouterr().err
    assert main(["prove", "T > 0", "--range", "T=two"]) == 2
    assert main(["prove"]) == 2


def test_explain_text_and_file(tmp_path, capsys):
    assert main(["explain", MESSAGE]) == 1
    out = capsys.readouterr().out
    assert "fails at:   T = 4" in out and "1 fail" in out
    log = tmp_path / "export.log"
    log.write_text("some output\n  - " + MESSAGE.replace("(L['x'].size()[1] % 4) != 0",
                   "(((-1) + ((2*L['x'].size()[1]*L['x'].size()[1]) // L['x'].size()[1])) % "
                   "L['x'].size()[1]) != 0")
                   + "\nmore output\n")
    assert main(["explain", str(log)]) == 0
    assert "1 hold for every value in range" in capsys.readouterr().out
    assert main(["explain", str(tmp_path / "missing.log")]) == 2
    assert main(["explain", "nothing torch would print"]) == 2


def test_export_and_report(tmp_path, capsys):
    saved, page = tmp_path / "m.pt2", tmp_path / "r.html"
    assert main(["export", f"{MODELS}:exports", "--save", str(saved), "--report", str(page)]) == 0
    assert saved.stat().st_size > 0 and "exported" in page.read_text()
    capsys.readouterr()
    assert main(["export", f"{MODELS}:fails"]) == 1
    err = capsys.readouterr().err
    assert "x.size(1) = T" in err and "fails at T = 3" in err and "2*Dim(" in err
    assert main(["report", f"{MODELS}:fails", "-o", str(page)]) == 1
    assert "export failed" in page.read_text()
    assert main(["export", f"{MODELS}:nope"]) == 2
    assert main(["export", "not_a_module_anywhere:f"]) == 2


def test_empty_range_is_bad_input_not_a_vacuous_proof(capsys):
    assert main(["prove", "T > 10000", "--range", "T=4096:2"]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["prove", "T > 10000", "--range", "T=5:5"]) == 1     # a single point is a range


def test_non_ascii_digits_and_names_in_ranges_are_bad_input(capsys):
    for spec in ("T=٣:٥", "T=3:٥", "T=４", "T٣=3:5"):
        assert main(["prove", "T > 0", "--range", spec]) == 2, spec
        assert "bad --range" in capsys.readouterr().err


def test_timeout_must_be_finite_and_positive(capsys):
    for value in ("-1", "0", "nan", "inf", "-inf", "٣"):
        assert main(["prove", "T > 0", "--range", "T=1:9", "--timeout", value]) == 2, value
        assert "timeout" in capsys.readouterr().err
        assert main(["explain", MESSAGE, "--timeout", value]) == 2, value
    assert main(["prove", "T > 0", "--range", "T=1:9", "--timeout", "0.5"]) == 0


def test_unknown_strategy_is_bad_input(capsys):
    assert main(["prove", "T > 0", "--strategy", "exec"]) == 2
    assert main(["explain", MESSAGE, "--strategy", "exec"]) == 2
    assert "unknown strategy" in capsys.readouterr().err


def test_explain_jsonl_whose_message_is_not_a_string_is_bad_input(tmp_path, capsys):
    for line in ('{"message": 5}', '{"message": ["x"]}', '[1, 2]', '{"text": "x"}', '{not json'):
        path = tmp_path / "errors.jsonl"
        path.write_text(json.dumps({"message": MESSAGE}) + "\n" + line + "\n")
        assert main(["explain", str(path)]) == 2, line
        err = capsys.readouterr().err
        assert "errors.jsonl:2" in err and "Traceback" not in err
    path.write_text(json.dumps({"message": MESSAGE}) + "\n\n")
    assert main(["explain", str(path)]) == 1


def test_no_traceback_from_text_the_engine_cannot_handle():
    """``1/(x/y)`` made the solver raise TypeError (issue 14): the command says so in one line."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "shapeproof", "prove", "1/(x/y) > 0", "--range", "x=1:5"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode in (1, 2) and "Traceback" not in run.stdout + run.stderr


def test_serve_on_a_bad_or_taken_port_is_bad_input(capsys):
    import socket

    assert main(["serve", "--port", "99999"]) == 2
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["serve", "--port", str(taken.getsockname()[1])]) == 2
    assert "cannot listen" in capsys.readouterr().err


def test_messages_with_huge_numbers_or_too_long_for_a_file_name_are_explained(capsys):
    """An int past the largest double met an infinite interval end (OverflowError), a 5,000-digit range
    bound met int()'s digit limit (ValueError), and a 300-character message was stat'ed as a file name
    (ENAMETOOLONG): each was an internal error."""
    huge = "Not all values of T = L['x'].size()[1] satisfy the generated guard (L['x'].size()[1] // " \
           "(18446744073709551616 ** 16)) > 0."
    digits = MESSAGE.replace("T <= 1024", "2 <= T <= " + "9" * 5000)
    padded = MESSAGE + " " * 200
    for message in (huge, digits, padded):
        assert main(["explain", message]) == 1
        captured = capsys.readouterr()
        assert "internal error" not in captured.out + captured.err and "1 fail" in captured.out


def test_bad_output_paths_strategies_and_huge_ranges_are_bad_input(tmp_path, capsys):
    """Each of these ended in a traceback (after the export had run), or, for an unknown strategy on a model
    that records no guard, in success."""
    model = str(MODELS) + ":exports"
    for argv in (["report", model, "-o", str(tmp_path)],
                 ["export", model, "--save", str(tmp_path / "missing" / "x.pt2")],
                 ["export", model, "--strategy", "bogus"],
                 ["prove", "T > 0", "--range", "T=" + "9" * 5000 + ":"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("shapeproof: ") and "Traceback" not in err and len(err) < 400
