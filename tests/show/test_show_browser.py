"""The pages `tinyspec show` writes, in a real headless browser (Chromium from Debian,
installed by scripts/setup.sh where it may; skipped elsewhere): every graph of the corpus
and of interop/programs/ on one page loads with no console message, the script sets up
every picture, pan/zoom and find work, the page fetches nothing, and a screenshot is not
blank."""
from __future__ import annotations
import os
import shutil
from pathlib import Path
import pytest
from showcheck import ink, browse, BROWSER
from tinyspec.cli import main
from tinyspec.graph import load_file
from tinyspec.validate import validate_file
from tinyspec.show import picture, render_svg, render_html, html

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium: scripts/setup.sh installs it where it may (TINYSPEC_NO_BROWSER=1 skips that)")


def corpus_graphs(imported) -> list[Path]:
  cases = sorted((ROOT / "conformance" / "cases").glob("**/graph.json"))
  rules = sorted(p for p in (ROOT / "conformance" / "rules").glob("**/*") if p.suffix in (".json", ".yaml") and not p.name.endswith(".expect.json"))
  return [p for p in (*cases, *rules, *imported) if load_file(p)[0] is not None]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
  """interop/programs/ imported with `tinyspec import-tinygrad` (none without tinygrad)."""
  try: import tinygrad  # noqa: F401
  except ImportError: return []
  os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
  out = tmp_path_factory.mktemp("imported")
  programs = sorted(str(p) for p in (ROOT / "interop" / "programs").glob("*.py") if not p.name.startswith("_"))
  assert main(["import-tinygrad", *programs, "--out", str(out), "--no-check"]) == 0
  return sorted(p for p in out.glob("*/*.json") if p.name != "import-report.json")


def test_every_graph_loads_in_the_browser_without_a_console_message(tmp_path, imported):
  """All pictures on one page, as the conformance report embeds them (html.view per
  picture, one script): no console message, and the script reached every picture."""
  graphs = corpus_graphs(imported)
  assert len(graphs) > 1100 and (not imported or len(imported) > 100)
  views = []
  for k, path in enumerate(graphs):
    res = validate_file(path)
    views.append(html.view(render_svg(picture(res.graph, result=res, file=str(path)), id_prefix=f"g{k}-")))
  page = tmp_path / "all.html"
  page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                  f"<meta http-equiv='Content-Security-Policy' content=\"{html.CSP}\">{html.assets()}</head><body>"
                  + "\n".join(views) + html.script() + "</body></html>", encoding="utf-8")
  dom, console = browse(tmp_path, page, "--dump-dom")
  assert console == []
  assert dom.count('class="tinyspec-view') == len(graphs)
  boxes = dom.count('<g class="node')
  assert boxes > len(graphs) and dom.count("data-tip=") >= boxes   # every box's title moved to data-tip: the script ran to the end
  assert "</title>" not in dom                                     # (the page itself has none)


def test_pan_zoom_and_find_work(tmp_path):
  """Events dispatched on the page after the script set it up: the wheel zooms, a drag
  pans, find centres a node and marks it, an absent node says so."""
  graph = ROOT / "conformance/rules/CALL.body/valid-kernel.json"
  page = tmp_path / "page.html"
  probe = """<script>
  var svg = document.querySelector('.tinyspec-view svg'), out = [];
  var v0 = svg.getAttribute('viewBox');
  svg.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: 300, clientY: 300, bubbles: true, cancelable: true}));
  var v1 = svg.getAttribute('viewBox');
  out.push(v0 !== v1 && parseFloat(v1.split(' ')[2]) < parseFloat(v0.split(' ')[2]) ? 'zoomed' : 'no-zoom');
  svg.dispatchEvent(new PointerEvent('pointerdown', {clientX: 300, clientY: 300, pointerId: 1, bubbles: true}));
  svg.dispatchEvent(new PointerEvent('pointermove', {clientX: 350, clientY: 320, pointerId: 1, bubbles: true}));
  svg.dispatchEvent(new PointerEvent('pointerup', {clientX: 350, clientY: 320, pointerId: 1, bubbles: true}));
  out.push(svg.getAttribute('viewBox') !== v1 ? 'panned' : 'no-pan');
  var find = document.querySelector('.tinyspec-view .find');
  find.value = '3'; find.dispatchEvent(new Event('change'));
  out.push(document.querySelectorAll('.found').length === 1 && document.querySelector('.found').getAttribute('data-node') === '3' ? 'found' : 'not-found');
  find.value = '999'; find.dispatchEvent(new Event('change'));
  out.push(document.querySelector('.tinyspec-view .said').textContent.indexOf('not drawn') >= 0 ? 'absent-said' : 'absent-silent');
  document.body.setAttribute('data-probe', out.join(' '));
  </script></body>"""
  page.write_text(render_html(load_file(graph)[0]).replace("</body>", probe), encoding="utf-8")
  dom, console = browse(tmp_path, page, "--dump-dom", "--window-size=1200,800")
  assert console == []
  assert 'data-probe="zoomed panned found absent-said"' in dom


def test_the_console_check_sees_errors_and_the_page_fetches_nothing(tmp_path):
  """The check is not blind: a page that tries to fetch an image and to run code from
  elsewhere logs the refusals of its Content-Security-Policy."""
  graph = ROOT / "conformance/rules/ops/ADD/valid-example.json"
  page = tmp_path / "page.html"
  page.write_text(render_html(load_file(graph)[0]).replace(
    "</body>", '<img src="http://127.0.0.1:9/x.png"><script src="http://127.0.0.1:9/x.js"></script></body>'), encoding="utf-8")
  _, console = browse(tmp_path, page, "--dump-dom")
  assert any("Content Security Policy" in line for line in console), console


def test_a_screenshot_of_a_page_is_not_blank(tmp_path, imported):
  """The page of an invalid kernel graph in its clusters (or of a tensor graph of softmax,
  when tinygrad is installed): the screenshot has drawing in it, in several colours."""
  graph = next((p for p in imported if p.name == "r1.tensor.json" and p.parent.name == "softmax"), ROOT / "conformance/rules/CALL.body/valid-kernel.json")
  out = tmp_path / "page.html"
  assert main(["show", str(graph), "-o", str(out)]) == 0
  shot = tmp_path / "shot.png"
  _, console = browse(tmp_path, out, f"--screenshot={shot}", "--window-size=1400,900")
  assert console == []
  share, colours = ink(shot.read_bytes())
  assert share > 0.02 and colours > 8, (share, colours)
