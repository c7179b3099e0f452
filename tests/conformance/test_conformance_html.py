"""`tinyspec conformance --html DIR` (issue 16): the report of a deliberately broken
backend (the example backend with ADD computing a - b) shows the op x dtype matrix with
the failing cells linked to their failures; each failure has its message, the operand
values at the first differing elements, the inputs, the graph's picture and the repro
command; the page loads in headless Chromium with no console message and its screenshot
shows the matrix's colours."""
from __future__ import annotations
import re
import pytest
from test_repro import _broken_backend
from tinyspec.cli import main
from tinyspec.conformance.run.htmlreport import COLOUR
from tinyspec.conformance.run.failures import first_positions


@pytest.fixture(scope="module")
def report(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("html")
  backend = _broken_backend(tmp)
  rc = main(["conformance", "--backend", backend, "-k", "(float32 or int32) and not narrowed", "--html", str(tmp / "rep"),   # one failure a cell
             "--junit", str(tmp / "r.xml")])
  assert rc == 1
  return tmp, (tmp / "rep" / "index.html").read_text()


def test_the_page_holds_the_matrix_and_each_failure_with_what_reproduces_it(report):
  tmp, page = report
  assert 'id="matrix-starter-python"' in page
  fails = re.findall(r'<div class="failure" id="([^"]+)"><h3>FAIL ([^<]+)</h3>', page)
  assert fails and all(case.startswith("ADD/") for _, case in fails)
  for anchor, _ in fails: assert f'href="#{anchor}"' in page            # a red cell links to its failure
  assert COLOUR["fail"] in page and COLOUR["pass"] in page
  assert "operands at the first differing elements" in page and re.search(r"buf0\[\d+\] = ", page)
  assert page.count('class="tinyspec-view') == len(fails)               # a picture per failure
  assert page.count("repro: tinyspec run --backend") == len(fails)
  assert "repro: tinyspec run" in (tmp / "r.xml").read_text()            # JUnit messages carry it too


def test_first_positions():
  assert first_positions("out0: 2 of 9 differ; at (24,): got 0, expected -1; at (0, 3): got 1") == [(24,), (0, 3)]


def test_the_page_in_a_headless_browser(report, tmp_path):
  from showcheck import read_png, browse, BROWSER
  if BROWSER is None: pytest.skip("no chromium")
  tmp, _ = report
  page = tmp / "rep" / "index.html"
  dom, console = browse(tmp_path, page, "--dump-dom")
  assert console == []
  assert dom.count("data-tip=") > 0   # the pictures' script ran
  shot = tmp_path / "shot.png"
  browse(tmp_path, page, f"--screenshot={shot}", "--window-size=1200,900")
  w, h, rows = read_png(shot.read_bytes())
  bpp = len(rows[0]) // w
  pixels = {bytes(r[x * bpp:x * bpp + 3]) for r in rows[::2] for x in range(0, w, 2)}
  for status in ("fail", "pass", "unsupported"):   # the matrix is on screen, in its colours
    assert bytes.fromhex(COLOUR[status][1:]) in pixels, status
