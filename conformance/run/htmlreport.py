"""`tinyspec conformance --html DIR`: a static report (DIR/index.html, self-contained: no
script or style from the network) of a run: per backend an op x dtype matrix coloured by
result and profile (the worst result of the cases covering each pair, in RANK's order:
fail, error, unexpected pass, expected failure, a pass in the portable profile only, a
strict pass, unsupported; each failing cell a link to its failure), then per failure its
message (the first differing elements), the values the inputs hold at those elements, the
inputs, the first divergent node (conformance/run/divergence.py), the graph's picture
(tinyspec.show: the differing outputs and the first divergent node marked) and the
one-line command that reproduces it."""
from __future__ import annotations
import re
from html import escape
from pathlib import Path
import numpy as np
from tinyspec.conformance.run.failures import operand_lines
from tinyspec.conformance.corpus.cases import load_array
from tinyspec.validate import validate_file
from tinyspec.show import picture, render_svg, html
from tinyspec.conformance.run import runner
from tinyspec.files import make_dir, output_path, write_file

# worst first: the colour a matrix cell takes when several cases cover it. A pass is split by
# conformance profile (tinyspec.tolerance.PROFILES): "pass" met the strict profile (the
# canonical results), "portable" only the portable one (an allowed result other than the canonical)
RANK = ["fail", "error", "xpass", "xfail", "portable", "pass", "unsupported", "skip"]
COLOUR = {"pass": "#2e9d4f", "portable": "#7fc8e8", "fail": "#d73a3a", "error": "#8e44ad", "xpass": "#e67e22",
          "xfail": "#f1c40f", "unsupported": "#c8c8c8", "skip": "#e0e0e0"}
LABEL = {"pass": "strict pass", "portable": "portable-only pass", "fail": "fail", "error": "error", "xpass": "unexpected pass",
         "xfail": "expected failure", "unsupported": "unsupported", "skip": "skip"}


def cell_status(r) -> str:
  """A result's status in the matrix: a pass is "portable" when it fails the strict profile."""
  return "portable" if r.status == "pass" and r.profiles.get("strict") == "fail" else r.status


STYLE = """
body.report { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table.matrix { border-collapse: collapse; font-size: 12px; }
table.matrix th { font-weight: 600; padding: 2px 6px; text-align: left; }
table.matrix th.dt { writing-mode: vertical-rl; transform: rotate(180deg); height: 6em; }
table.matrix td { width: 18px; height: 18px; border: 1px solid #fff; text-align: center; }
table.matrix td a { display: block; width: 100%; height: 100%; }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; color: #111; border-radius: 3px; }
p.divergence { margin: .2em 0; }
.failure { border-top: 1px solid #ccc; margin-top: 1.5em; padding-top: .5em; }
.failure pre { background: #f6f6f6; padding: .5em; overflow-x: auto; white-space: pre-wrap; }
"""


def _inputs(case) -> str:
  rows = []
  for name, (path, dt) in sorted(case.inputs.items()):
    try:
      x = np.asarray(load_array(path, dt))
      head = np.array2string(x.reshape(-1)[:12], threshold=12, max_line_width=200)
      rows.append(f"{name}: {dt} {tuple(x.shape)} {head}{' …' if x.size > 12 else ''}")
    except Exception as e:
      rows.append(f"{name}: unreadable ({type(e).__name__})")
  return "\n".join(rows) or "(no inputs)"


def _picture(case, k: int, message: str, divergence: dict | None = None) -> str:
  """The case's graph as an inline SVG view, the outputs the message names marked and
  the first divergent node (conformance/run/divergence.py) marked and in focus."""
  try:
    res = validate_file(case.graph)
    if res.graph is None: return "<p>(the graph cannot be read)</p>"
    outs = set(re.findall(r"\b(out\d+|param\d+):", message))
    roots = list(res.graph.root_indices)
    mark = {r: "an output that differs" for j, r in enumerate(roots) if f"out{j}" in outs} or {roots[-1]: "the output"} if roots else {}
    first = (divergence or {}).get("node")
    if first is not None: mark[first] = "first divergent node: " + str(divergence.get("detail", ""))[:300]
    return html.view(render_svg(picture(res.graph, result=res, file=str(case.graph), highlight=mark, focus=first), id_prefix=f"f{k}-"))
  except Exception as e:   # a picture that cannot be drawn does not lose the report
    return f"<p>(no picture: {escape(type(e).__name__)}: {escape(str(e)[:200])})</p>"


def _divergence(d: dict | None) -> str:
  """The first divergent node, as a line above the picture (where it is drawn marked)."""
  if not d: return ""
  if d.get("node") is None: return f'<h4>first divergent node</h4><p class="divergence">not found: {escape(str(d.get("note", "")))}</p>'
  dims = [str(x) for x in d.get("shape", ())]
  shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
  sure = {True: "its computed sources agree", False: "a source also differs", None: "its sources were not all checked"}[d.get("sources_agree")]
  note = f"; {d['note']}" if d.get("note") else ""
  return (f'<h4>first divergent node</h4><p class="divergence"><b>node {d["node"]} {escape(str(d.get("op")))} '
          f'{escape(str(d.get("dtype")))} {escape(shape)}</b> (marked in the graph; {escape(sure)}, {d.get("runs", 0)} backend runs{escape(note)})</p>'
          f'<pre>{escape(str(d.get("detail", "")))}</pre>')


def _matrix(backend: str, results, cases: dict) -> str:
  cell: dict = {}
  for r in results:
    c = cases.get(r.case)
    for op, dt in (getattr(c, "covers", None) or []):
      old, st = cell.get((op, dt)), cell_status(r)
      if old is None or RANK.index(st) < RANK.index(old[0]): cell[(op, dt)] = (st, r.case)
  ops = sorted({op for op, _ in cell})
  dts = sorted({dt for _, dt in cell})
  head = "<tr><th></th>" + "".join(f'<th class="dt">{escape(d)}</th>' for d in dts) + "</tr>"
  rows = []
  for op in ops:
    tds = []
    for dt in dts:
      if (op, dt) not in cell: tds.append("<td></td>"); continue
      st, cid = cell[(op, dt)]
      link = f'<a href="#{_anchor(backend, cid)}"></a>' if st in ("fail", "error", "xpass") else ""
      tds.append(f'<td style="background:{COLOUR[st]}" title="{escape(f"{op} {dt}: {LABEL[st]} ({cid})")}">{link}</td>')
    rows.append(f"<tr><th>{escape(op)}</th>{''.join(tds)}</tr>")
  return f'<table class="matrix" id="matrix-{escape(backend)}">{head}{"".join(rows)}</table>'


def _anchor(backend: str, cid: str) -> str:
  return "f-" + re.sub(r"[^A-Za-z0-9_-]", "_", f"{backend}-{cid}")


def render(results, cases: dict, title: str = "tinyspec conformance") -> str:
  """The report page: results (runner.Result), cases (id -> ExecCase)."""
  by: dict = {}
  for r in results: by.setdefault(r.backend, []).append(r)
  parts = [f"<h1>{escape(title)}</h1>", f"<p>{escape(runner.summary_line(runner.counts(results)))}</p>",
           '<p class="legend">' + "".join(f'<span style="background:{COLOUR[s]}">{LABEL[s]}</span>' for s in RANK) + "</p>"]
  k = 0
  for backend, rs in by.items():
    bad = [r for r in rs if r.status in ("fail", "error", "xpass")]
    parts.append(f"<h2>{escape(backend)}: {escape(runner.summary_line(runner.counts(rs)))}</h2>")
    parts.append(_matrix(backend, rs, cases))
    for r in bad:
      k += 1
      c = cases.get(r.case)
      sec = [f'<div class="failure" id="{_anchor(backend, r.case)}"><h3>{escape(r.status.upper())} {escape(r.case)}</h3>',
             f"<pre>{escape(r.message)}</pre>"]
      if c is not None and c.kind == "positive":
        ops = operand_lines(c, r.message)
        if ops: sec.append("<h4>operands at the first differing elements</h4><pre>" + escape("\n".join(ops)) + "</pre>")
        sec.append("<h4>inputs</h4><pre>" + escape(_inputs(c)) + "</pre>")
        sec.append(_divergence(r.divergence))
        sec.append("<h4>graph</h4>" + _picture(c, k, r.message, r.divergence))
      sec.append("</div>")
      parts.append("".join(sec))
  return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f'<meta http-equiv="Content-Security-Policy" content="{html.CSP}">',
                    f"<title>{escape(title)}</title>", html.assets(), f"<style>{STYLE}</style>", '</head><body class="report">',
                    *parts, html.script(), "</body></html>", ""])


def write(out_dir, results, cases: dict) -> Path:
  """DIR/index.html (DIR made if missing; tinyspec.files rules for writing)."""
  d = make_dir(out_dir)
  return write_file(output_path(d, "index", ".html", "report"), render(results, cases))
