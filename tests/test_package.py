"""Loading a split package runs no code from it: pickles, zip bombs, eval'd text and bad manifests are
refused."""
from __future__ import annotations

import contextlib
import io
import json
import pickle
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import shapeproof
import torch
import torch.nn.functional as F_nn
from shapeproof.export.search.package import PackageError, check_guard_code, check_sympy_text
from shapeproof.export.search.split import load_split
from torch.export import Dim


class PadThenScale(torch.nn.Module):
    """Two regions (``T % 4``: the padded side is also scaled, so the branch is a real one), and a weight
    in each member."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        if x.shape[1] % 4 != 0:
            x = F_nn.pad(x, (0, 0, 0, 4 - x.shape[1] % 4)) * 2
        return x * self.scale


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    program = shapeproof.export(PadThenScale(), (torch.randn(2, 10, 3),),
                                dynamic_shapes=({1: Dim("T", min=2, max=64)},), split=True,
                                cond_branches=False)       # a package of programs, not one cond
    return program.save(tmp_path_factory.mktemp("pkg") / "good.zip")


def _entries(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _with_member(package: Path, out: Path, edit) -> Path:
    """A copy of ``package`` whose region_0.pt2 entries went through ``edit(dict) -> dict``."""
    outer = _entries(package)
    outer["region_0.pt2"] = _zip(edit(_entries(io.BytesIO(outer["region_0.pt2"]))))
    out.write_bytes(_zip(outer))
    return out


def _member_file(entries: dict, suffix: str) -> str:
    return next(name for name in entries if name.endswith(suffix))


class WriteMarker:
    """A pickle whose loading writes a file: what an attacker's payload would do."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.write_text, (self.path, "payload ran")


def _pickled_weight(marker: Path):
    def edit(entries):
        config_name = _member_file(entries, "model_weights_config.json")
        config = json.loads(entries[config_name])
        meta = next(iter(config["config"].values()))
        meta["use_pickle"] = True
        entries[config_name] = json.dumps(config).encode()
        entries[config_name.rsplit("/", 1)[0] + "/" + meta["path_name"]] = pickle.dumps(WriteMarker(marker))
        return entries
    return edit


def test_the_good_package_loads_and_runs(package):
    loaded = load_split(package)
    x = torch.randn(2, 7, 3)
    assert torch.allclose(loaded.module()(x), PadThenScale()(x))


def test_a_pickled_weight_is_refused_and_its_payload_never_runs(package, tmp_path):
    marker = tmp_path / "marker"
    crafted = _with_member(package, tmp_path / "crafted.zip", _pickled_weight(marker))
    with pytest.raises(PackageError, match="use_pickle"):
        load_split(crafted)
    assert not marker.exists()
    # the payload is live: torch alone runs it (the reason for the check above)
    with zipfile.ZipFile(crafted) as zf:
        member = zf.read("region_0.pt2")
    with contextlib.suppress(Exception):      # only whether the payload ran matters here
        torch.export.load(io.BytesIO(member))
    assert marker.read_text() == "payload ran"


def test_an_entry_that_differs_from_a_checked_one_only_in_case_is_refused(package, tmp_path):
    """torch's zip reader finds ``model.pt`` whatever its case, so a pickled ``MODEL.pt`` written first was
    what torch.export.load unpickled (falling back to the full unpickler), while the check read the
    genuine ``model.pt``."""
    marker = tmp_path / "marker"

    def edit(entries):
        inputs = _member_file(entries, "sample_inputs/model.pt")
        return {inputs[:-len("model.pt")] + "MODEL.pt": pickle.dumps(WriteMarker(marker)), **entries}

    crafted = _with_member(package, tmp_path / "crafted.zip", edit)
    with pytest.raises(PackageError, match="differ only in case"):
        load_split(crafted)
    assert not marker.exists()


def test_an_entry_whose_name_is_not_ascii_is_refused(package, tmp_path):
    """Python decodes a name as UTF-8 or cp437 by a flag, torch compares its bytes: two entries with the same
    bytes could read as two names (one checked, the other unpickled)."""
    def edit(entries):
        inputs = _member_file(entries, "sample_inputs/model.pt")
        return {**entries, inputs[:-len("model.pt")] + "\u00dfCC.pt": pickle.dumps(1)}

    with pytest.raises(PackageError, match="not ASCII"):
        load_split(_with_member(package, tmp_path / "crafted.zip", edit))


@pytest.mark.parametrize("text", [
    "*".join(["18446744073709551615**1024"] * 300),        # each power bounded, their product is not
    "Float('1.5', 100000000)", "Float('1.5', dps=10000000)",
])
def test_symbolic_text_that_takes_minutes_to_compute_is_refused(text):
    with pytest.raises(PackageError):
        check_sympy_text(text)


def test_sample_inputs_that_need_the_full_unpickler_are_refused(package, tmp_path):
    marker = tmp_path / "marker"

    def edit(entries):
        entries[_member_file(entries, "sample_inputs/model.pt")] = pickle.dumps(WriteMarker(marker))
        return entries

    with pytest.raises(PackageError, match="full unpickler"):
        load_split(_with_member(package, tmp_path / "crafted.zip", edit))
    assert not marker.exists()


@pytest.mark.parametrize("where, text", [
    ("expr_str", "__import__('pathlib').Path('MARKER').write_text('x')"),
    ("expr_str", "Max(\"__import__('os').getcwd()\", Symbol('s0'))"),
    ("expr_str", "Symbol('s0').func"),
    ("guards_code", "__import__('pathlib').Path('MARKER').write_text('x') or True"),
    ("guards_code", "L['x'].size()[1] > (lambda: 0)()"),
    ("guards_code", "L['x'].__class__ is not None"),
    # no code, but sympify (or the check at every call) would compute 10**10**7 for half a minute
    ("expr_str", "Mul(Integer(2), Symbol('s27', positive=True, integer=True)) + 0*10**10**7"),
    ("guards_code", "L['x'].size()[1] > 0*10**10**7"),
])
def test_text_torch_would_eval_is_refused(package, tmp_path, where, text):
    marker = tmp_path / "MARKER"
    text = text.replace("MARKER", str(marker))

    def edit(entries):
        name = _member_file(entries, "models/model.json")
        model = json.loads(entries[name])
        if where == "guards_code":
            model["guards_code"] = [text]
        else:
            todo = [model]
            while todo:
                node = todo.pop()
                if isinstance(node, dict) and "expr_str" in node:
                    node["expr_str"] = text
                    break
                todo.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list)
                            else [])
        entries[name] = json.dumps(model).encode()
        return entries

    crafted = _with_member(package, tmp_path / "crafted.zip", edit)
    with pytest.raises(PackageError):
        load_split(crafted).module()
    assert not marker.exists()


def test_the_checks_accept_what_torch_writes():
    check_sympy_text("Add(Symbol('s27', positive=True, integer=True), Mul(Integer(-1), Mod(Symbol('s27', "
                     "positive=True, integer=True), Integer(4))), Integer(4))")
    check_sympy_text("FloorDiv(s0 + 15, 16) >= Float('0.5', precision=53)")
    check_sympy_text("FloatPow(ToFloat(s0), 0.5) + s1**2 + PowByNatural(s0, s1) + Pow(s0, Integer(-1))")
    check_guard_code("((L['x'].size()[1]) % 4) != 0")
    check_guard_code("(L['x'].size()[1] % 4 != 0) and (max(L['x'].size()[1], 8) < 60) and "
                     "-((-L['x'].size()[1]) // 16) > 1")


def test_an_aotinductor_entry_is_refused(package, tmp_path):
    def edit(entries):
        root = next(iter(entries)).split("/", 1)[0]
        entries[f"{root}/data/aotinductor/model/model.so"] = b"\x7fELF"
        return entries

    with pytest.raises(PackageError, match="unexpected entry"):
        load_split(_with_member(package, tmp_path / "crafted.zip", edit))


def _bomb(path: Path, name: str, mib: int) -> None:
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf, \
            zf.open(name, "w", force_zip64=True) as f:
        for _ in range(mib):
            f.write(bytes(1 << 20))


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(package, tmp_path):
    bomb = tmp_path / "bomb.zip"
    bomb.write_bytes(package.read_bytes())
    _bomb(bomb, "padding.bin", 64)
    assert bomb.stat().st_size < package.stat().st_size + (1 << 20)      # 64 MiB in well under 1 MiB
    with pytest.raises(PackageError, match="zip bomb"):
        load_split(bomb)


def test_a_bomb_inside_a_member_is_refused(package, tmp_path):
    inner = tmp_path / "inner.zip"
    inner.write_bytes(_entries(package)["region_0.pt2"])
    root = zipfile.ZipFile(inner).namelist()[0].split("/", 1)[0]
    _bomb(inner, f"{root}/extra/huge", 64)
    outer = _entries(package)
    outer["region_0.pt2"] = inner.read_bytes()
    crafted = tmp_path / "crafted.zip"
    crafted.write_bytes(_zip(outer))
    with pytest.raises(PackageError, match="zip bomb"):
        load_split(crafted)


def _claiming(path: Path, name: str, size: int) -> None:
    """Patch both headers of the entry ``name`` (the local one and the central directory's) to say it
    unpacks to ``size`` bytes."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
        central = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x05\x06"))
        while data[central + 46:central + 46 + len(name)] != name.encode():      # this entry's record
            central = data.rfind(b"PK\x01\x02", 0, central)
    data[info.header_offset + 22:info.header_offset + 26] = size.to_bytes(4, "little")
    data[central + 24:central + 28] = size.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def test_an_entry_is_inflated_no_further_than_its_header_claims(package, tmp_path):
    """64 MiB of spaces deflate to 64 KiB; with both size headers saying 500, the entry passes the size
    checks, and reading it inflated all 64 MiB (up to 1 GiB) before cutting it to 500 bytes."""
    entries = _entries(package)
    crafted = tmp_path / "crafted.zip"
    with zipfile.ZipFile(crafted, "w") as zf:
        for name, data in entries.items():
            if name == "manifest.json":
                zf.writestr(name, b" " * (64 << 20), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            else:
                zf.writestr(name, data)
    _claiming(crafted, "manifest.json", 500)
    assert crafted.stat().st_size < package.stat().st_size + (1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(PackageError, match="manifest.json"):
            load_split(crafted)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def _manifest(package: Path, out: Path, edit) -> Path:
    entries = _entries(package)
    manifest = json.loads(entries["manifest.json"])
    entries["manifest.json"] = edit(manifest) if callable(edit) else edit
    if isinstance(entries["manifest.json"], dict):
        entries["manifest.json"] = json.dumps(entries["manifest.json"]).encode()
    out.write_bytes(_zip(entries))
    return out


def _set(key, value):
    def edit(manifest):
        manifest[key] = value
        return manifest
    return edit


def _region(key, value):
    def edit(manifest):
        manifest["regions"][0][key] = value
        return manifest
    return edit


@pytest.mark.parametrize("edit", [
    b"{not json",
    b"[1, 2]",
    _set("format", "other/1"),
    lambda m: {k: v for k, v in m.items() if k != "box"},
    lambda m: {k: v for k, v in m.items() if k != "regions"},
    _set("params", "x"),
    _set("params", [1]),
    _set("variables", ["T"]),
    _set("variables", {"T": 5}),
    _set("variables", {"T": "__import__('os')"}),
    _set("box", {"T": [64, 2]}),
    _set("box", {"T": [2]}),
    _set("box", {"T": ["2", 64]}),
    _set("box", {"U": [2, 64]}),
    _set("regions", []),
    _set("regions", "region_0.pt2"),
    _region("predicate", "__import__('os').system('true')"),
    _region("predicate", "(T % 4) !="),
    _region("predicate", "U > 2"),
    _region("predicate", 5),
    _region("program", "missing.pt2"),
    _region("program", "manifest.json"),
    _region("program", ["region_0.pt2"]),                               # TypeError escaped
    lambda m: {**m, "regions": [m["regions"][0]] * 2},                  # one member loaded twice
    lambda m: {**m, "regions": [m["regions"][0]] * 3000},               # 58 s of loading
])
def test_a_malformed_manifest_raises_package_error(package, tmp_path, edit):
    with pytest.raises(PackageError):
        load_split(_manifest(package, tmp_path / "bad.zip", edit))


def test_a_manifest_is_read_in_time_linear_in_its_size(package, tmp_path):
    """A regular expression over input paths backtracked quadratically: 13 s on 80 KB of "L["."""
    import time

    crafted = _manifest(package, tmp_path / "bad.zip", _set("variables", {"T": "L[" * 40_000}))
    start = time.perf_counter()
    with pytest.raises(PackageError):
        load_split(crafted)
    assert time.perf_counter() - start < 2


def test_a_damaged_member_raises_package_error(package, tmp_path):
    """A bad CRC, an unknown compression method or the encryption flag made zipfile's own errors escape."""
    outer = _entries(package)
    damaged = tmp_path / "damaged.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in outer.items():
            zf.writestr(name, data)
    raw = bytearray(buffer.getvalue())
    start = raw.index(outer["region_0.pt2"][:64])
    raw[start + 100] ^= 0xFF                      # the stored member's bytes no longer match its CRC
    damaged.write_bytes(bytes(raw))
    with pytest.raises(PackageError, match="cannot read region_0.pt2"):
        load_split(damaged)


def test_a_file_that_is_not_a_package_raises_package_error(tmp_path):
    not_zip = tmp_path / "x.zip"
    not_zip.write_bytes(b"PK\x03\x04 not really a zip")
    for path in (not_zip, tmp_path / "missing.zip"):
        with pytest.raises(PackageError):
            load_split(path)
    empty = tmp_path / "empty.zip"
    empty.write_bytes(_zip({}))
    with pytest.raises(PackageError, match="manifest"):
        load_split(empty)


def test_a_graph_node_that_is_not_a_torch_operator_is_refused(package, tmp_path):
    """What stays trusted: torch's verifier refuses such a node when the program is built."""
    def edit(entries):
        name = _member_file(entries, "models/model.json")
        model = json.loads(entries[name])
        node = next(n for n in model["graph_module"]["graph"]["nodes"]
                    if n["target"].startswith("torch.ops.aten"))
        node["target"], node["inputs"] = "torch.serialization.os.getcwd", []
        entries[name] = json.dumps(model).encode()
        return entries

    with pytest.raises(PackageError, match="not an allowed operator"):
        load_split(_with_member(package, tmp_path / "crafted.zip", edit))
