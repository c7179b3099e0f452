"""`tinyspec show FILE|DIR [-o OUT] [--format svg|dot|html] ...`: a picture of a graph.

FILE is any graph file `tinyspec validate` reads (an invalid one is drawn with its errors
on the nodes they name); DIR is a folder written by `tinyspec compile --dump-stages DIR`
(every stage side by side, or --stage S and the stage after it).

Exit codes: 0 a valid graph drawn, 1 an invalid graph drawn (its errors also go to
stderr), 2 nothing drawn: the file cannot be read or is not a graph, the folder holds no
stages, the output cannot be written, or bad usage.
"""
from __future__ import annotations
import sys
from pathlib import Path
from tinyspec.deadline import add_option as add_timeout_option
from tinyspec.diagnostics import EXIT_UNREADABLE
from tinyspec.files import FileRefused, printable, write_file
from tinyspec.show.model import DEFAULT_LIMIT, picture
from tinyspec.validate import validate_file
from tinyspec.show.stages import stage_pictures, StageError
from tinyspec.show import render_svg, render_dot, render_html

FORMATS = {".svg": "svg", ".dot": "dot", ".gv": "dot", ".html": "html", ".htm": "html"}


def show_command(sub):
  p = sub.add_parser("show", help="draw a graph (SVG, Graphviz dot, or an HTML page with pan and zoom)",
                     description="Draw a graph file, or the stages of `tinyspec compile --dump-stages DIR` side by side: "
                                 "boxes with op, dtype, shape and arg; edges in source order; derived properties and errors "
                                 "on hover; kernel and function bodies as clusters. Long chains collapse and big graphs "
                                 "are cut at --limit boxes with a count of the rest. Exit 0 valid graph drawn, 1 invalid "
                                 "graph drawn, 2 nothing drawn (unreadable file, not a graph, bad usage).")
  p.add_argument("file", metavar="FILE|DIR", help="a graph file, or a folder written by compile --dump-stages")
  p.add_argument("-o", "--out", metavar="OUT", help="write here (the format follows .svg, .dot/.gv, .html); default: stdout")
  p.add_argument("--format", choices=["svg", "dot", "html"], help="output format (default: from OUT's suffix, else svg)")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto", help="the level to validate at, as validate")
  p.add_argument("--limit", metavar="N", type=int, default=DEFAULT_LIMIT,
                 help=f"draw at most N boxes, the ones nearest the roots (or --focus); 0: no limit (default {DEFAULT_LIMIT})")
  p.add_argument("--collapse", choices=["auto", "on", "off"], default="auto",
                 help="collapse runs of single-use elementwise/movement nodes into one box (auto: in graphs over 300 nodes)")
  p.add_argument("--focus", metavar="NODE", type=int, help="draw the boxes nearest this node index")
  p.add_argument("--stage", metavar="S", help="(DIR) the stage (number or name) to draw beside the next one")
  add_timeout_option(p)

  def run(a) -> int:
    fmt = a.format or (FORMATS.get(Path(a.out).suffix.lower()) if a.out else "svg")
    if fmt is None:
      return _usage(f"cannot tell the format from {a.out!r}: name it .svg, .dot or .html, or pass --format")
    if a.limit < 0: return _usage("--limit: N >= 0")
    options = {"limit": a.limit, "collapse": a.collapse}
    if Path(a.file).is_dir():
      if a.focus is not None: return _usage("--focus applies to a graph file, not a stages folder")
      pics, code = _stages(a, options)
    else:
      if a.stage is not None: return _usage("--stage applies to a folder written by compile --dump-stages")
      pics, code = _graph(a, options)
    if pics is None: return code
    text = _render(pics, fmt)
    if a.out is None:
      sys.stdout.write(text); sys.stdout.flush()
      return code
    try:
      write_file(a.out, text)   # through a temporary name: a planted link at OUT is replaced, not followed
    except FileRefused as e:
      print(f"tinyspec show: {e}", file=sys.stderr)
      return e.exit_code
    return code
  return p, run


def _usage(msg: str) -> int:
  print(f"tinyspec show: {printable(msg)}", file=sys.stderr)
  return EXIT_UNREADABLE


def _graph(a, options):
  res = validate_file(a.file, a.level)
  for d in res.diagnostics: print(d.format(), file=sys.stderr)
  if res.graph is None:
    print(f"tinyspec show: {printable(a.file)}: nothing to draw (not a graph)", file=sys.stderr)
    return None, EXIT_UNREADABLE
  if a.focus is not None and not 0 <= a.focus < len(res.graph.nodes):
    return None, _usage(f"--focus {a.focus}: the graph has nodes 0..{len(res.graph.nodes) - 1}")
  pic = picture(res.graph, result=res, focus=a.focus, file=a.file, **options)
  return [pic], res.exit_code


def _stages(a, options):
  try:
    pics = stage_pictures(a.file, a.stage, level=a.level, **options)
  except StageError as e:
    print(f"tinyspec show: {printable(str(e))}", file=sys.stderr)
    return None, EXIT_UNREADABLE
  return pics, max(p.exit_code for p in pics)


def _render(pics, fmt: str) -> str:
  return {"svg": render_svg, "dot": render_dot, "html": render_html}[fmt](pics)
