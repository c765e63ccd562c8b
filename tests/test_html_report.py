"""The HTML report of an export: what the page says, that user text cannot inject markup, and what a browser
draws.

The browser test runs Debian's chromium headless.  It is skipped only when
chromium is missing *and* ``SHAPEPROOF_REQUIRE_BROWSER`` is unset; ``.ci/run``
sets it, so in CI a missing browser fails the test instead of skipping it.
"""
import inspect
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from markupsafe import escape    # the escaping of the report's templates (&#39; for ', not &#x27;)
from shapeproof.export import ExportError, export_with_report
from shapeproof.export.html import write_report
from shapeproof.shapes import ShapeEnv, Source
from shapeproof.shapes.apps.html_report import render_html
from torch.export import Dim

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

ARTIFACTS = Path(__file__).parent / "artifacts"
HOSTILE = "<script>alert('x')</script>"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


class StackFour(torch.nn.Module):
    def forward(self, x):
        b, t, d = x.shape
        return x.reshape(b, t // 4, 4 * d)[:, 1]       # T % 4 == 0, and at least two rows of 4


class PadAndTake(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        x = F.pad(x, (0, 0, 0, (-x.shape[1]) % 4))
        b, t, d = x.shape
        if (t // 4) * 4 != t:         # padded to a multiple of 4: torch cannot prove it, the engine does
            raise ValueError("unreachable")
        return x.reshape(b, t // 4, 4 * d)[:k]


def _reshape_line() -> int:
    lines, start = inspect.getsourcelines(StackFour.forward)
    return start + next(i for i, line in enumerate(lines) if "reshape" in line)


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("T", min=2, max=64)},)
    with pytest.raises(ExportError) as err:
        export_with_report(StackFour(), (torch.randn(2, 8, 3),), dynamic_shapes=spec)
    path = write_report(err.value, tmp_path_factory.mktemp("report") / "failed.html",
                        title=f"{HOSTILE} report")
    return err.value, path, path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def succeeded(tmp_path_factory):
    spec = ({0: Dim("B", min=2, max=8), 1: Dim("T", min=8, max=64)}, None)
    result = export_with_report(PadAndTake(), (torch.randn(3, 10, 2), torch.tensor(2)), dynamic_shapes=spec)
    path = write_report(result, tmp_path_factory.mktemp("report") / "exported.html")
    return result, path.read_text(encoding="utf-8")


def _svgs(page: str) -> list[ElementTree.Element]:
    """Every inline SVG, parsed as XML (so a broken or unescaped one fails here)."""
    out, pos = [], 0
    while (start := page.find("<svg", pos)) >= 0:
        pos = page.index("</svg>", start) + len("</svg>")
        out.append(ElementTree.fromstring(page[start:pos]))
    return out


def test_failed_export_page_shows_where_why_and_how_to_fix(failed):
    err, path, page = failed
    assert path.exists() and "export failed" in page
    # the user's source line, as file:line and as code
    assert f"test_html_report.py:{_reshape_line()}" in page
    assert escape("return x.reshape(b, t // 4, 4 * d)") in page
    # the counterexample of each violation, evaluated step by step down to the failing relation
    assert [v.counterexample for v in err.violations] == [{"T": 2, "B": 2}, {"T": 2}]
    assert '<span class="chip">T = 2</span>' in page and '<span class="chip">B = 2</span>' in page
    assert '<tr class="false"><td><code>(3*B*T) == (12*B*(T // 4))</code></td><td><code>False</code>' in page
    assert '<tr class="false"><td><code>(T // 4) &gt; 1</code></td><td><code>False</code>' in page
    # every fix, the per-guard ones and the combined one
    fixes = [f.description for v in err.violations
             for f in v.fixes] + [f.description for f in err.report.combined_fixes]
    assert fixes and all(escape(d) in page for d in fixes)
    # failed guards are open; the header counts them
    assert page.count('<details class="card s-refuted"') == 2
    assert page.count(" open><summary>") == 2
    assert '<div class="tile bad"><b>2</b><span>refuted</span>' in page


def test_failed_export_page_draws_each_guards_dependencies(failed):
    _, _, page = failed
    svgs = _svgs(page)
    assert len(svgs) == 2                       # one graph per guard
    ns = "{http://www.w3.org/2000/svg}"
    texts = [[t.text for t in svg.iter(f"{ns}text")] for svg in svgs]
    # guard 0 needs B and T: both input dims, both symbols, the guard; guard 1 needs only T
    assert {"x.size(0)", "x.size(1)", "guard #0"} <= set(texts[0])
    assert "x.size(0)" not in texts[1] and {"x.size(1)", "guard #1"} <= set(texts[1])
    edges = [sum(1 for p in svg.iter(f"{ns}path") if p.get("class") == "edge") for svg in svgs]
    # input -> symbol -> guard, per dim; guard 1 reads T through T / 4, the divisibility guard 0 implies
    assert any(text.startswith("T / 4 ") for text in texts[1])
    assert edges == [4, 3]


def test_the_title_cannot_inject_markup(failed):
    _, _, page = failed
    assert "<script" not in page.lower()
    assert f"<title>{escape(HOSTILE)} report</title>" in page
    assert f"<h1>{escape(HOSTILE)} report</h1>" in page


def test_names_paths_and_source_lines_are_escaped():
    env = ShapeEnv()
    t = env.create_backed_symbol(50, Source("<b>x</b>.size(1)", "x", 1), declared=(2, 1024),
                                 dim_name="<i>T</i>")
    n = env.create_backed_symbol(6, Source("y.size(0)", "y", 0), declared=(0, 64), dim_name="N")
    env.record_guard(f"{t} >= 2")                          # proven over the range
    env.record_guard(f"{n} >= 2")                          # proven from 2 up, but the spec allows 0 and 1
    env.evaluate(f"({t} % 4) != 0")  # refuted at T = 4; <script>alert(1)</script> on the user's line
    page = render_html(env, env.produce_guards(), title="t", exported=False)
    assert "<b>x</b>" not in page and "<i>T</i>" not in page and "<script" not in page
    assert escape("<script>alert(1)</script> on the user's line") in page     # the source line
    assert "&lt;b&gt;x&lt;/b&gt;.size(1)" in page and "&lt;i&gt;T&lt;/i&gt;" in page
    for svg in _svgs(page):
        assert svg.tag.endswith("svg")
    # failed first, then the 0/1 warning, proven last
    order = [page.index(f'<details class="card s-{s}"') for s in ("refuted", "warning", "proven")]
    assert order == sorted(order)


def test_successful_export_page(succeeded):
    result, page = succeeded
    assert '<span class="outcome ok">exported</span>' in page and "export failed" not in page
    assert "PadAndTake" in page and "Exported program" in page and "user inputs" in page
    assert len(result.discharged) > 0
    assert f'Discharged by the engine <span class="count">{len(result.discharged)}</span>' in page
    assert page.count('<details class="card s-not-checked"') == len(result.engine.runtime_asserts) == 2
    assert 'class="badge b-refuted"' not in page and 'class="failure"' not in page
    assert 'class="file"' in page and "test_html_report.py:" in page    # discharged questions keep their line


def test_write_report_rejects_other_objects(tmp_path):
    with pytest.raises(TypeError):
        write_report(object(), tmp_path / "x.html")


# ------------------------------------------------------------------ a real browser
def _png_pixels(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG with zlib (no imaging library in the test extras)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    assert depth == 8 and colour in (2, 6) and not interlace
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = out[0].copy()
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1)
        if kind in (0, 2):          # none, up
            out[y] = line + prev if kind == 2 else line
        elif kind == 1:             # sub: a running sum per channel
            out[y] = np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(-1)
        else:                       # average, paeth: sequential along the row
            cur, up = bytearray(line.tobytes()), prev.tobytes()
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = up[i]
                if kind == 3:
                    cur[i] = (cur[i] + ((a + b) >> 1)) & 255
                    continue
                c = up[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            out[y] = np.frombuffer(bytes(cur), np.uint8)
        prev = out[y]
    return out.reshape(height, width, bpp)[..., :3]


def _chromium(*args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None, "SHAPEPROOF_REQUIRE_BROWSER is set but chromium is not installed"
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", *args],
                          capture_output=True, text=True, timeout=180, check=True)


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("SHAPEPROOF_REQUIRE_BROWSER"),
                    reason="chromium is not installed (set SHAPEPROOF_REQUIRE_BROWSER=1 to make this a "
                    "failure)")
def test_failed_export_page_renders_in_a_headless_browser(failed):
    err, _, _ = failed
    ARTIFACTS.mkdir(exist_ok=True)
    page = write_report(err, ARTIFACTS / "report.html")            # the default title names the model
    png = ARTIFACTS / "report.png"
    png.unlink(missing_ok=True)
    _chromium(f"--screenshot={png}", "--window-size=1200,1600", page.resolve().as_uri())
    data = png.read_bytes()
    assert 20_000 < len(data) < 20_000_000
    pixels = _png_pixels(data)
    assert pixels.shape == (1600, 1200, 3)
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 100                                   # text, badges, graphs: not a blank page
    red = np.all(pixels == (0xcf, 0x22, 0x2e), axis=-1)         # the refuted guards' accent: CSS was applied
    assert red.sum() > 1000

    dom = _chromium("--dump-dom", page.resolve().as_uri()).stdout
    assert "<title>StackFour: shapeproof export report</title>" in dom
    assert '<span class="chip">T = 2</span>' in dom and "(T // 4) &gt; 1" in dom
    assert "<script" not in dom.lower()
