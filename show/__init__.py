"""Pictures of graphs: `tinyspec show`, and the API other tools (the conformance report)
draw with.

    from tinyspec.show import render_svg, render_dot, render_html, picture
    svg = render_svg(graph)                                  # a Graph: validated here
    svg = render_svg(graph, result=res, highlight={17: "first divergent node: got 0, expected -1"},
                     id_prefix="case3-")                     # several pictures on one page
    page = render_html(graph, title="gemm")                  # a whole self-contained page
    dot = render_dot(graph)                                  # for Graphviz
    svg = render_svg(stage_pictures("stages/", "rangeify"))  # a stage beside the next

Every render_* takes a Graph, a Picture, or a list of Pictures (drawn side by side),
and for a Graph the options of `picture()`: result, level, limit, collapse, focus,
highlight, title, file. A box's hover text (SVG <title>) holds the node's derived
properties (dtype, shape, device, addrspace, min_max, axis) and its diagnostics; an
invalid node is drawn red. To embed pictures in another HTML page, use
`tinyspec.show.html`: assets() once in the head, view(svg) per picture, script() once.

No Graphviz is needed: the layout is tinyspec.show.layout (layered, deterministic).
"""
from __future__ import annotations
from tinyspec.show.model import Picture, picture, DEFAULT_LIMIT
from tinyspec.show.stages import stage_pictures, stages, StageError
from tinyspec.show.svg import render_svg_pictures, header
from tinyspec.show.dot import render_dot_pictures
from tinyspec.show import html

__all__ = ["Picture", "picture", "render_svg", "render_dot", "render_html", "stage_pictures", "stages", "StageError", "DEFAULT_LIMIT"]


def _pictures(what, options) -> list:
  if isinstance(what, Picture): return [what]
  if isinstance(what, (list, tuple)): return list(what)
  return [picture(what, **options)]


def render_svg(what, *, id_prefix: str = "", **options) -> str:
  """SVG text (a standalone document, also fit to put inline in HTML)."""
  return render_svg_pictures(_pictures(what, options), id_prefix=id_prefix)


def render_dot(what, **options) -> str:
  """Graphviz dot text (`dot -Tsvg` lays it out)."""
  return render_dot_pictures(_pictures(what, options))


def render_html(what, *, title: str | None = None, **options) -> str:
  """A self-contained HTML page (no network) with pan, zoom, tooltips and find."""
  pics = _pictures(what, options)
  svg = render_svg(pics)
  return html.page(svg, title or " → ".join(p.title for p in pics), _summary(pics))


def _summary(pics) -> str:
  if len(pics) == 1:
    lines = header(pics[0])
    return "; ".join([lines[0].split(": ", 1)[-1], *lines[1:4]]) + (" …" if len(lines) > 4 else "")
  n = sum(p.nodes for p in pics)
  bad = sum(1 for p in pics if p.exit_code)
  return f"{len(pics)} graphs side by side, {n:,} nodes" + (f", {bad} invalid" if bad else "")
