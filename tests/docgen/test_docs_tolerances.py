"""The PDF's Tolerances table (issue 16): prose, not Python dict reprs, in wrapping columns
that fit the page (pdflatex reports no overfull box in it, where pdflatex is installed)."""
from __future__ import annotations
import re
import shutil
import subprocess
import pytest
from tinyspec import docgen
from tinyspec.docgen.model import tolerance_text
from tinyspec.tables import tables


def _table(tex: str) -> tuple[int, int, str]:
  """(first line, last line, text) of the Tolerances longtable in spec.tex (lines from 1)."""
  lines = tex.splitlines()
  head = next(i for i, ln in enumerate(lines) if ln.startswith(r"\subsection*{Tolerances"))
  end = next(i for i in range(head, len(lines)) if lines[i].startswith(r"\end{longtable}"))
  return head + 1, end + 1, "\n".join(lines[head:end + 1])


@pytest.fixture(scope="module")
def spec_tex():
  return docgen.render_spec_tex(tables())


def test_the_table_has_no_python_reprs(spec_tex):
  _, _, t = _table(spec_tex)
  assert "{'" not in t and "':" not in t and r"\{'" not in t, t
  # RECIP's portable bound, as prose: equal figures grouped, the float8s under one prefix
  assert r"float16, bfloat16, float8\_\{e4m3, e5m2, e4m3fnuz, e5m2fnuz\}: 1; float32: 3; float64: 0" in t
  assert r">{\raggedright\arraybackslash}p{" in t                  # wrapping columns
  md = docgen.render_spec_md(tables(), None)
  section = md[md.index("## Tolerances"):md.index("## Rule catalogue")]
  assert "{'" not in section and "':" not in section


def test_the_op_pages_have_no_python_reprs():
  """Each op's facts table gives its tolerance entry in the same prose as the Tolerances table."""
  md = docgen.render_spec_md(tables(), None)
  lines = [ln for ln in md.splitlines() if ln.startswith("| tolerance |")]
  assert lines and not [ln for ln in lines if "{'" in ln or "':" in ln]
  assert any("portable_ulp (float16, bfloat16, float8_{e4m3, e5m2, e4m3fnuz, e5m2fnuz}: 1; float32: 3; float64: 0)" in ln for ln in lines)


def test_tolerance_text():
  assert tolerance_text({"float16": 1, "bfloat16": 1, "float32": 3}) == "float16, bfloat16: 1; float32: 3"
  assert tolerance_text({"float32": "abs(T) <= 1e5"}) == "float32: abs(T) <= 1e5" and tolerance_text(0) == "0"
  assert tolerance_text({"float8_e4m3": 1, "float32": 1, "float8_e5m2": 1, "float64": 2}) == "float8_{e4m3, e5m2}, float32: 1; float64: 2"
  assert tolerance_text({"float8": 1, "float8_e4m3": 1, "float16": 2}) == "float8, float8_e4m3: 1; float16: 2"


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_table_fits_the_page(spec_tex, tmp_path):
  (tmp_path / "spec.tex").write_text(spec_tex)
  subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "spec.tex"], cwd=tmp_path,
                 capture_output=True, text=True, timeout=180)
  log = (tmp_path / "spec.log").read_text(errors="replace")
  first, last, _ = _table(spec_tex)
  over = [(int(a), int(b)) for a, b in re.findall(r"Overfull \\hbox .*? at lines? (\d+)--(\d+)", log)]
  inside = [(a, b) for a, b in over if a <= last and b >= first]
  assert not inside, f"overfull boxes in the Tolerances table (lines {first}-{last}): {inside}"
