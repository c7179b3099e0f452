"""Graphviz dot text of a picture, for people who lay it out with Graphviz themselves
(`dot -Tsvg`): the same boxes, clusters (subgraph cluster_*), edges with their source
positions as labels, and the hover text as tooltips. Needs no layout of its own."""
from __future__ import annotations
from tinyspec.show.structure import TOP
from tinyspec.show.svg import PALETTE, INVALID, HIGHLIGHT, NEW, header


def quote(s: str) -> str:
  """A dot double-quoted string: backslashes and quotes escaped, so no text in a graph
  (a label with \\N or \\G) is read as a dot escape; newlines become \\n."""
  return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n") + '"'


def _lines(lines) -> str:
  """Left-justified label lines (dot's \\l ends each)."""
  body = "".join(line.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", " ") + "\\l" for line in lines)
  return '"' + body + '"'


def render_dot_pictures(panels, name: str = "tinyspec") -> str:
  """dot text of one picture, or of several side by side (each in a cluster of its own,
  its ids prefixed p0-, p1-...)."""
  out = [f"digraph {quote(name)} {{",
         '  graph [rankdir=TB, fontname="monospace", fontsize=11, labelloc=t, labeljust=l'
         + (f", label={_lines(header(panels[0]))}];" if len(panels) == 1 else "];"),
         '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10, color="#78909c"];',
         '  edge [fontname="monospace", fontsize=8, color="#607d8b", arrowsize=0.6];']
  if len(panels) == 1: out += _body(panels[0], "", "  ")
  else:
    for k, pic in enumerate(panels):
      out.append(f"  subgraph {quote(f'cluster_p{k}')} {{")
      out.append(f"    graph [label={_lines(header(pic))}, color=\"#cfd8dc\"];")
      out += _body(pic, f"p{k}-", "    ")
      out.append("  }")
  out.append("}")
  return "\n".join(out) + "\n"


def _body(pic, prefix: str, indent: str) -> list[str]:
  out: list[str] = []
  children: dict[int, list] = {}
  for c, box in enumerate(pic.clusters): children.setdefault(box.parent, []).append(c)
  members: dict[int, list] = {}
  for k, it in enumerate(pic.items): members.setdefault(it.scope, []).append(k)

  def emit(scope: int, ind: str):
    for k in members.get(scope, []): out.append(ind + _node(pic.items[k], prefix))
    for c in children.get(scope, []):
      box = pic.clusters[c]
      out.append(f"{ind}subgraph {quote('cluster_' + prefix + box.id)} {{")
      color = "#4db6ac" if box.kind == "listing" else "#9575cd"
      out.append(f"{ind}  graph [label={quote(box.title)}, tooltip={quote(box.tip)}, color=\"{color}\", style=rounded];")
      emit(c, ind + "  ")
      out.append(f"{ind}}}")
  emit(TOP, indent)
  fills: dict[int, int] = {}
  for e in pic.edges: fills[e.dst] = fills.get(e.dst, 0) + max(len(e.positions), 1)
  for e in pic.edges:
    a, b = pic.items[e.src], pic.items[e.dst]
    attrs = [f"tooltip={quote(e.tip)}"]
    if b.kind == "node" and fills[e.dst] > 1 and e.positions: attrs.append(f"label={quote(','.join(map(str, e.positions)))}")
    if e.kind == "more": attrs.append('style=dashed, color="#b0bec5"')
    out.append(f"{indent}{quote(prefix + a.id)} -> {quote(prefix + b.id)} [{', '.join(attrs)}];")
  return out


def _node(it, prefix: str) -> str:
  attrs = [f"label={_lines(it.lines)}", f"tooltip={quote(it.tip)}", f"fillcolor=\"{PALETTE.get(it.category, PALETTE['unknown'])}\""]
  if it.invalid: attrs.append(f"color=\"{INVALID}\", penwidth=3, fillcolor=\"#ffcdd2\"")
  elif it.highlight: attrs.append(f"color=\"{HIGHLIGHT}\", penwidth=3")
  elif it.new: attrs.append(f"color=\"{NEW}\", penwidth=2")
  if it.kind == "chain": attrs.append("peripheries=2")
  if it.kind == "more": attrs.append('style="rounded,dashed"')
  return f"{quote(prefix + it.id)} [{', '.join(attrs)}];"
