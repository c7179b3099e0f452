"""SVG text of laid-out pictures: one panel per picture, side by side (a stage and the
next). Every node box is a <g class="node"> with the node's hover text as its <title>;
edges are <g class="edge"> paths with an arrow and, into a node with several sources,
the source position at the port; clusters are <g class="cluster"> boxes under the rest.

Ids are `{id_prefix}{panel}{item}` (n12: node 12, c40: the chain starting at node 40,
k7: the cluster of node 7), so several pictures can share one HTML page."""
from __future__ import annotations
from xml.sax.saxutils import escape, quoteattr
from tinyspec.show.layout import layout, LINE_H, PAD_X, PAD_Y, CHAR_W

MARGIN = 16.0
PANEL_GAP = 60.0
HEAD_LINE = 16.0

# fill colours by op category (ops.yaml `categories`), shared with the dot writer
PALETTE = {"source": "#eceff1", "movement": "#e3f2fd", "reduce": "#ffe0b2", "call": "#ede7f6", "load": "#e8f5e9",
           "store": "#c8e6c9", "ordering": "#f5f5f5", "elementwise": "#fff9c4", "decomposed": "#fff3e0", "marker": "#ffffff",
           "multi": "#e0f7fa", "codegen": "#e0f2f1", "unknown": "#ffebee", "more": "#ffffff"}
INVALID, HIGHLIGHT, NEW = "#c62828", "#1565c0", "#2e7d32"

STYLE = "\n".join([
  ".tinyspec-graph text { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 11px; fill: #263238; }",
  ".tinyspec-graph .node rect { stroke: #78909c; stroke-width: 1; }",
  ".tinyspec-graph .node .head { font-weight: bold; }",
  *(f".tinyspec-graph .cat-{c} rect {{ fill: {v}; }}" for c, v in PALETTE.items()),
  ".tinyspec-graph .cat-more rect { stroke-dasharray: 4 3; }",
  ".tinyspec-graph .chain rect { stroke-width: 3; stroke: #90a4ae; }",
  f".tinyspec-graph .new rect {{ stroke: {NEW}; stroke-width: 2.5; }}",
  f".tinyspec-graph .highlight rect {{ stroke: {HIGHLIGHT}; stroke-width: 3.5; }}",
  f".tinyspec-graph .invalid rect {{ stroke: {INVALID}; stroke-width: 3; fill: #ffcdd2; }}",
  f".tinyspec-graph .badge {{ fill: {INVALID}; font-weight: bold; }}",
  ".tinyspec-graph .edge path { fill: none; stroke: #607d8b; stroke-width: 1.1; }",
  ".tinyspec-graph .edge.more path { stroke: #b0bec5; stroke-dasharray: 4 3; }",
  ".tinyspec-graph .edge .port { font-size: 9px; fill: #455a64; }",
  ".tinyspec-graph .cluster rect { fill: #faf8ff; stroke: #9575cd; stroke-width: 1.2; }",
  ".tinyspec-graph .cluster.listing rect { fill: #f3fbfa; stroke: #4db6ac; }",
  ".tinyspec-graph .cluster text { font-weight: bold; fill: #5e35b1; }",
  ".tinyspec-graph .cluster.listing text { fill: #00796b; }",
  ".tinyspec-graph .panel-title { font-size: 13px; font-weight: bold; }",
  f".tinyspec-graph .note {{ fill: {INVALID}; }}",
  ".tinyspec-graph .note.info { fill: #455a64; }",
])


def _n(v: float) -> str:
  """A coordinate, short: 12.5, 3."""
  r = round(v, 1)
  return str(int(r)) if r == int(r) else str(r)


def ranges(nodes) -> str:
  """Node indices as space-separated ranges: '2-41 2382 4763-4765'."""
  out, start = [], None
  for k, j in enumerate(nodes):
    if start is None: start = j
    if k + 1 == len(nodes) or nodes[k + 1] != j + 1:
      out.append(str(start) if start == j else f"{start}-{j}"); start = None
  return " ".join(out)


def _curve(pts) -> str:
  """An SVG path through the points: straight where vertical, else an S-curve leaving and
  entering vertically (edges run from a box's bottom to the next layer's top)."""
  (x0, y0), out = pts[0], [f"M{_n(pts[0][0])},{_n(pts[0][1])}"]
  for x1, y1 in pts[1:]:
    if abs(x1 - x0) < 0.5: out.append(f"L{_n(x1)},{_n(y1)}")
    else:
      m = (y0 + y1) / 2
      out.append(f"C{_n(x0)},{_n(m)} {_n(x1)},{_n(m)} {_n(x1)},{_n(y1)}")
    x0, y0 = x1, y1
  return " ".join(out)


def header(pic) -> list[str]:
  """The lines above a picture: title, size and verdict, then its notes."""
  verdict = "valid" if pic.exit_code == 0 else "INVALID"
  size = f"{pic.nodes:,} nodes" + (f", {pic.level} level" if pic.level else "")
  extra = []
  if pic.collapsed: extra.append(f"{pic.collapsed:,} in collapsed chains")
  if pic.hidden: extra.append(f"{pic.hidden:,} not shown")
  return [f"{pic.title}: {size}, {verdict}" + (f" ({', '.join(extra)})" if extra else "")] + list(pic.notes)


def render_svg_pictures(panels, id_prefix: str = "") -> str:
  """SVG of one or more pictures side by side (each laid out on its own)."""
  scenes = [layout(p) for p in panels]
  heads = [header(p) for p in panels]
  offsets, x = [], MARGIN
  widths = []
  for _p, s, h in zip(panels, scenes, heads):
    w = max(s.width, max(len(line) for line in h) * CHAR_W * 1.25)
    offsets.append(x); widths.append(w); x += w + PANEL_GAP
  width = x - PANEL_GAP + MARGIN
  height = max(len(h) * HEAD_LINE + 8 + s.height for s, h in zip(scenes, heads)) + 2 * MARGIN
  out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tinyspec-graph" width="{_n(width)}" height="{_n(height)}" '
         f'viewBox="0 0 {_n(width)} {_n(height)}">',
         f'<defs><marker id="{id_prefix}arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
         f'<path d="M0,0 L10,5 L0,10 z" fill="#607d8b"/></marker></defs>',
         f"<style>\n{STYLE}\n</style>"]
  many = len(panels) > 1
  for k, (p, s, h, ox) in enumerate(zip(panels, scenes, heads, offsets)):
    prefix = f"{id_prefix}p{k}-" if many else id_prefix
    out += _panel(p, s, h, ox, MARGIN, prefix, id_prefix)
  out.append("</svg>")
  return "\n".join(out) + "\n"


def _panel(pic, scene, head, ox, oy, prefix, arrow_prefix) -> list[str]:
  out = [f'<g class="panel" transform="translate({_n(ox)},{_n(oy)})">']
  for r, line in enumerate(head):
    cls = "panel-title" if r == 0 else ("note" if line.startswith("error") else "note info")
    out.append(f'<text class="{cls}" x="0" y="{_n(12 + r * HEAD_LINE)}">{escape(line)}</text>')
  top = len(head) * HEAD_LINE + 8
  out.append(f'<g transform="translate(0,{_n(top)})">')
  out.append('<g class="clusters">')
  for _c, (box, (x, y, w, h)) in enumerate(zip(pic.clusters, scene.clusters)):
    if w is None: continue
    out.append(f'<g class="cluster {box.kind}" id={quoteattr(prefix + box.id)}><title>{escape(box.tip)}</title>'
               f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="6"/>'
               f'<text x="{_n(x + 8)}" y="{_n(y + 15)}">{escape(box.title)}</text></g>')
  out.append("</g>")
  out.append('<g class="edges">')
  fills: dict[int, int] = {}     # source positions drawn into each box: label them where there are several
  for edge in pic.edges: fills[edge.dst] = fills.get(edge.dst, 0) + max(len(edge.positions), 1)
  for e, (edge, pts) in enumerate(zip(pic.edges, scene.edges)):
    a, b = pic.items[edge.src], pic.items[edge.dst]
    d = _curve(pts)
    label = ",".join(map(str, edge.positions)) if b.kind == "node" and fills[edge.dst] > 1 else ""
    px, py = scene.ports[e]
    text = f'<text class="port" x="{_n(px + 3)}" y="{_n(py - 3)}">{escape(label)}</text>' if label else ""
    out.append(f'<g class="edge{" more" if edge.kind == "more" else ""}" data-src={quoteattr(prefix + a.id)} data-dst={quoteattr(prefix + b.id)}>'
               f'<title>{escape(edge.tip)}</title><path d="{d}" marker-end="url(#{arrow_prefix}arrow)"/>{text}</g>')
  out.append("</g>")
  out.append('<g class="nodes">')
  for it, (x, y, w, h) in zip(pic.items, scene.items):
    cls = " ".join(c for c in ("node", it.kind if it.kind != "node" else "", f"cat-{it.category}", "invalid" if it.invalid else "",
                                "highlight" if it.highlight else "", "new" if it.new else "", "root" if it.root else "") if c)
    data = f' data-nodes="{ranges(it.nodes)}"' if len(it.nodes) > 1 else (f' data-node="{it.nodes[0]}"' if it.nodes else "")
    spans = []
    for r, line in enumerate(it.lines):
      head = ' class="head"' if r == 0 else ""
      spans.append(f'<tspan x="{_n(x + PAD_X)}" y="{_n(y + PAD_Y + LINE_H * (r + 1) - 3)}"{head}>{escape(line)}</tspan>')
    badge = f'<text class="badge" x="{_n(x + w - 10)}" y="{_n(y + 13)}">!</text>' if it.invalid else ""
    out.append(f'<g class="{cls}" id={quoteattr(prefix + it.id)}{data}><title>{escape(it.tip)}</title>'
               f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="3"/><text>{"".join(spans)}</text>{badge}</g>')
  out.append("</g></g></g>")
  return out
