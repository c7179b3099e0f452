"""`tinyspec show`: every graph of the corpus and of interop/programs/ is drawn (SVG that
parses with one node element per box, dot that a strict reader and Graphviz read, HTML
holding the SVG and the pan/zoom script), the layout keeps its promises (sources above
users, no overlaps, ports in source order, boxes inside their clusters, the same bytes
every run), invalid graphs carry their diagnostics, a --dump-stages folder is drawn
stage beside stage, a 100,000-node graph is collapsed and cut at the limit, hostile
text cannot break out of the SVG, HTML or dot, and the command line keeps its exit
codes. The browser loads the pages in tests/show/test_show_browser.py; speed is measured by
bench/bench_show.py, not here."""
from __future__ import annotations
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest
import xml.etree.ElementTree as ET
from showcheck import SVG, svg_nodes, title_of, parse_dot
from tinyspec.cli import main
from tinyspec.graph import load_file
from tinyspec.validate import validate_file
from tinyspec.show import picture, render_svg, render_dot, render_html, stage_pictures
from tinyspec.show.layout import layout

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "conformance" / "cases").glob("**/graph.json"))
RULES = sorted(p for p in (ROOT / "conformance" / "rules").glob("**/*") if p.suffix in (".json", ".yaml") and not p.name.endswith(".expect.json"))
PROGRAMS = sorted(p for p in (ROOT / "interop" / "programs").glob("*.py") if not p.name.startswith("_"))


def check_drawn(path: Path) -> None:
  """One graph file: its picture covers every node; SVG, dot and HTML read back."""
  res = validate_file(path)
  assert res.graph is not None
  pic = picture(res.graph, result=res, file=str(path))
  assert pic.exit_code == res.exit_code
  assert pic.hidden == 0 and {j for it in pic.items for j in it.nodes} == set(range(len(res.graph.nodes))), path
  svg = render_svg(pic)
  gs = svg_nodes(svg)
  assert len(gs) == len(pic.items), path
  assert sorted(g.get("id") for g in gs) == sorted(it.id for it in pic.items), path
  dot = parse_dot(render_dot(pic))
  assert set(dot["nodes"]) == {it.id for it in pic.items} and len(dot["edges"]) == len(pic.edges), path
  html = render_html(pic)
  assert svg.strip() in html and "tinyspec-view" in html and html.count("<script>") == 1, path
  check_layout(pic)
  for d in res.diagnostics:   # every diagnostic with a node is on that node's box
    if d.node is not None and 0 <= d.node < len(res.graph.nodes):
      assert any(f"[{d.rule}]" in title_of(g) and "invalid" in g.get("class") for g in gs if g.get("data-node") == str(d.node)), (path, d)


def check_layout(pic) -> None:
  """Sources above their users; node boxes disjoint and inside their clusters; an edge
  enters its box at a port left of the next source position's."""
  scene = layout(pic)
  for _e, edge in enumerate(pic.edges):
    _, ya, _, ha = scene.items[edge.src]
    _, yb, _, _ = scene.items[edge.dst]
    assert ya + ha <= yb, f"{pic.title}: edge {pic.items[edge.src].id} -> {pic.items[edge.dst].id} points up"
  for k, it in enumerate(pic.items):
    x, y, w, h = scene.items[k]
    s = it.scope
    while s != -1:
      cx, cy, cw, ch = scene.clusters[s]
      assert cx <= x and x + w <= cx + cw and cy <= y and y + h <= cy + ch, f"{pic.title}: {it.id} outside its cluster"
      s = pic.clusters[s].parent
  boxes = scene.items
  if len(boxes) <= 400:
    for a in range(len(boxes)):
      for b in range(a + 1, len(boxes)):
        xa, ya, wa, ha = boxes[a]; xb, yb, wb, hb = boxes[b]
        assert xa + wa <= xb or xb + wb <= xa or ya + ha <= yb or yb + hb <= ya, f"{pic.title}: {pic.items[a].id} overlaps {pic.items[b].id}"
  by_dst: dict = {}
  for e, edge in enumerate(pic.edges):
    if edge.positions: by_dst.setdefault(edge.dst, []).append((min(edge.positions), scene.ports[e][0]))
  for ports in by_dst.values():
    xs = [x for _, x in sorted(ports)]
    assert xs == sorted(xs), f"{pic.title}: ports out of source order"


# ------------------------------------------------------------------ every graph
@pytest.mark.parametrize("chunk", range(4))
def test_every_case_graph_is_drawn(chunk):
  for path in CASES[chunk::4]: check_drawn(path)


def test_every_rule_graph_is_drawn_or_refused_clearly(capsys, tmp_path):
  drawn = 0
  for path in RULES:
    g, diags = load_file(path)
    if g is not None:
      check_drawn(path); drawn += 1
      continue
    rc = main(["show", str(path), "-o", str(tmp_path / "x.svg")])   # not a graph: nothing drawn, exit 2
    err = capsys.readouterr().err
    assert rc == 2 and "nothing to draw" in err and f"[{diags[0].rule}]" in err and "Traceback" not in err
    assert not (tmp_path / "x.svg").exists()
  assert drawn > 200


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
  """interop/programs/ imported with `tinyspec import-tinygrad` (graphs of every level)."""
  pytest.importorskip("tinygrad")
  os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
  out = tmp_path_factory.mktemp("imported")
  assert main(["import-tinygrad", *map(str, PROGRAMS), "--out", str(out), "--no-check"]) == 0
  return sorted(p for p in out.glob("*/*.json") if p.name != "import-report.json")


def test_every_imported_program_graph_is_drawn(imported):
  assert {p.parent.name for p in imported} == {p.stem for p in PROGRAMS}
  levels = set()
  for path in imported:
    check_drawn(path)
    levels.add(json.loads(path.read_text())["level"])
  assert levels == {"tensor", "kernel", "program"}


# ------------------------------------------------------------------ what a picture shows
def write(tmp_path, nodes, name="g.json", **top) -> Path:
  p = tmp_path / name
  p.write_text(json.dumps({"format": "tinyspec-graph", "version": 1, **top, "nodes": nodes}))
  return p


def test_a_box_shows_op_dtype_shape_arg_and_hovers_its_properties(tmp_path):
  p = write(tmp_path, [{"op": "VCONST", "arg": {"values": [2, 3], "dtype": "index"}},
                       {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                       {"op": "CONST", "arg": {"value": 2.5, "dtype": "float32"}},
                       {"op": "MUL", "src": [1, 2]}])
  gs = {g.get("id"): g for g in svg_nodes(render_svg(load_file(p)[0]))}
  text = "".join(gs["n3"].itertext())
  assert "3 MUL" in text and "float32 (2, 3)" in text
  assert "2.5" in "".join(gs["n2"].itertext())           # a CONST's arg by its value
  tip = title_of(gs["n3"])
  for line in ("dtype: float32", "shape: (2, 3)", "device: CPU", "addrspace:", "min_max:", "axis:", "src: 0:A=1, 1:B=2"):
    assert line in tip


def test_edges_carry_their_source_positions(tmp_path):
  p = write(tmp_path, [{"op": "CONST", "arg": {"value": 2, "dtype": "int32"}},
                       {"op": "CONST", "arg": {"value": 3, "dtype": "int32"}},
                       {"op": "SUB", "src": [1, 0]}, {"op": "SUB", "src": [0, 0]}, {"op": "ADD", "src": [2, 3]}])
  pic = picture(load_file(p)[0])
  ids = [it.id for it in pic.items]
  edges = {(ids[e.src], ids[e.dst]): e.positions for e in pic.edges}
  assert edges[("n1", "n2")] == (0,) and edges[("n0", "n2")] == (1,)
  assert edges[("n0", "n3")] == (0, 1)                   # one edge, both positions
  svg = render_svg(pic)
  assert ">0,1</text>" in svg and ">1</text>" in svg
  dot = parse_dot(render_dot(pic))
  assert {(a, b): at.get("label") for a, b, at in dot["edges"]}[("n1", "n2")] == "0"


def test_kernel_and_function_bodies_are_clusters():
  call = picture(load_file(ROOT / "conformance/rules/CALL.body/valid-kernel.json")[0])
  func = picture(load_file(ROOT / "conformance/rules/FUNCTION.body/valid-tuple-body.json")[0])
  for pic, root in ((call, "SINK"), (func, "TUPLE")):
    assert [b.kind for b in pic.clusters] == ["body"] and root in pic.clusters[0].title
    inside = [it for it in pic.items if it.scope == 0]
    assert inside and all(it.id != pic.items[-1].id for it in inside)   # the CALL/FUNCTION itself is outside
  dot = parse_dot(render_dot(call))
  assert dot["clusters"] == [f"cluster_{call.clusters[0].id}"]


def test_a_program_listing_is_one_cluster_numbered_in_list_order():
  g = load_file(ROOT / "conformance/rules/ops/PROGRAM/valid-example.json")[0]
  pic = picture(g)
  (listing,) = [b for b in pic.clusters if b.kind == "listing"]
  assert "LINEAR" in listing.title and "instructions" in listing.title
  linear = next(i for i, n in enumerate(g.nodes) if n.op == "LINEAR")
  listed = [it for it in pic.items if it.nodes and it.nodes[0] in g.nodes[linear].src]
  assert all(f"#{g.nodes[linear].src.index(it.nodes[0])}" in it.lines[0] for it in listed)
  assert not any(pic.items[e.dst].nodes == [linear] for e in pic.edges)   # no edge per instruction


def test_a_constant_two_kernels_share_is_drawn_in_each(tmp_path):
  kernel = [{"op": "CONST", "arg": {"value": 4, "dtype": "index"}}, {"op": "RANGE", "src": [0], "arg": {"id": 0, "type": "LOOP"}},
            {"op": "VCONST", "arg": {"values": [4], "dtype": "index"}}, {"op": "PARAM", "src": [2], "arg": {"slot": 0, "dtype": "float32"}},
            {"op": "INDEX", "src": [3, 1]}, {"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}},
            {"op": "STORE", "src": [4, 5]}, {"op": "END", "src": [6, 1]}]
  nodes = kernel + [{"op": "SINK", "src": [7], "arg": {"name": "a"}}, {"op": "SINK", "src": [7], "arg": {"name": "b"}},
                    {"op": "BUFFER", "src": [2], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                    {"op": "CALL", "src": [8, 10]}, {"op": "CALL", "src": [9, 10]}, {"op": "SINK", "src": [11, 12]}]
  p = write(tmp_path, nodes)
  assert validate_file(p).ok
  pic = picture(load_file(p)[0])
  assert len([b for b in pic.clusters if b.kind == "body"]) == 2
  copies = [it for it in pic.items if it.nodes == [7]]        # the END both SINKs share: once per kernel
  assert len(copies) == 2 and {it.scope for it in copies} == {0, 1}
  vconst = [it for it in pic.items if it.nodes == [2]]       # the shape constant: in both kernels and at the top
  assert len(vconst) == 3


def test_an_invalid_graph_is_drawn_with_its_diagnostics(tmp_path, capsys):
  p = write(tmp_path, [{"op": "VCONST", "arg": {"values": [6], "dtype": "index"}},
                       {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                       {"op": "VCONST", "arg": {"values": [2, 4], "dtype": "index"}},
                       {"op": "RESHAPE", "src": [1, 2]}, {"op": "NEG", "src": [3]}], roots=[4, 9])
  out = tmp_path / "g.svg"
  assert main(["show", str(p), "-o", str(out)]) == 1
  err = capsys.readouterr().err
  assert "node 3 (RESHAPE)" in err and "[RESHAPE.numel]" in err
  gs = {g.get("id"): g for g in svg_nodes(out.read_text())}
  bad = gs["n3"]
  assert "invalid" in bad.get("class") and "[RESHAPE.numel]" in title_of(bad) and "! RESHAPE.numel" in "".join(bad.itertext())
  assert "derived properties: none" in title_of(gs["n4"])   # its user: no properties, not blamed
  assert "invalid" not in gs["n4"].get("class")
  assert "root 9 is not a node index" in out.read_text()      # an error without a node: on the picture


def test_a_file_with_schema_errors_is_drawn_around_the_broken_node(tmp_path):
  p = write(tmp_path, [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}, {"op": "NEG", "src": [0], "colour": "red"}])
  pic = picture(load_file(p)[0], result=validate_file(p))
  assert pic.exit_code == 1 and any(it.invalid and "file.schema" in it.tip for it in pic.items)
  svg_nodes(render_svg(pic))


def test_the_layout_uncrosses_and_aligns(tmp_path):
  """Barycentric ordering undoes the crossing file order makes (Q reads x, P reads y, but
  P comes first), and a box sits under its only source, not where packing left it."""
  c = lambda v: {"op": "CONST", "arg": {"value": v, "dtype": "float32"}}
  def centres(nodes):
    pic = picture(load_file(write(tmp_path, nodes))[0])
    scene = layout(pic)
    return {it.id: scene.items[k][0] + scene.items[k][2] / 2 for k, it in enumerate(pic.items)}
  at = centres([c(1.0), c(2.0), {"op": "NEG", "src": [1]}, {"op": "NEG", "src": [0]}, {"op": "ADD", "src": [3, 2]}])
  assert at["n3"] < at["n2"]                                     # Q under x, P under y: no crossing
  at = centres([c(1.2345678901234567), c(2.2345678901234567), {"op": "NEG", "src": [1]}])
  assert abs(at["n2"] - at["n1"]) < 1                            # under its source, the second box of its layer


# ------------------------------------------------------------------ compile stages
@pytest.fixture(scope="module")
def stages_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("stages")
  graph = ROOT / "conformance/cases/REDUCE/float32/graph.json"
  assert main(["compile", str(graph), "--dump-stages", str(d / "st")]) == 0
  return d / "st"


def test_a_stage_is_drawn_beside_the_next(stages_dir, capsys):
  names = sorted(p.stem for p in stages_dir.glob("*.json"))
  assert names[:3] == ["00_input", "01_callify", "02_rangeify"]
  out = stages_dir.parent / "pair.svg"
  assert main(["show", str(stages_dir), "--stage", "rangeify", "-o", str(out)]) == 0
  svg = out.read_text()
  assert svg.count('<g class="panel"') == 2 and "02_rangeify" in svg and "03_optimize" in svg
  pics = stage_pictures(stages_dir, "2")
  assert [p.title for p in pics] == ["02_rangeify", "03_optimize"]
  assert len(svg_nodes(svg)) == sum(len(p.items) for p in pics)
  assert len({g.get("id") for g in svg_nodes(svg)}) == len(svg_nodes(svg))   # ids unique across panels
  assert any(it.new for it in pics[1].items) and not any(it.new for it in pics[0].items)
  assert "new since the previous stage" in pics[1].notes[0]
  parse_dot(render_dot(pics))
  html = render_html(pics)
  assert html.count('<g class="panel"') == 2


def test_every_stage_is_drawn_and_bad_stage_folders_are_refused(stages_dir, tmp_path, capsys):
  out = tmp_path / "all.html"
  assert main(["show", str(stages_dir), "-o", str(out)]) == 0
  assert out.read_text().count('<g class="panel"') == len(list(stages_dir.glob("*.json")))
  assert main(["show", str(stages_dir), "--stage", "nosuch"]) == 2
  assert "no stage 'nosuch'" in capsys.readouterr().err
  assert main(["show", str(tmp_path)]) == 2                  # a folder without stages
  assert "compile --dump-stages" in capsys.readouterr().err


# ------------------------------------------------------------------ big graphs
def big_graph(n: int) -> dict:
  """Blocks of 40-op elementwise chains (each from its own constant, all using one shared
  constant), joined by a tree of MAX: about n nodes."""
  nodes = [{"op": "CONST", "arg": {"value": 0.5, "dtype": "float32"}}]
  heads = []
  for _ in range(-(-n // 42)):       # 41 nodes a block, and one MAX joining it
    nodes.append({"op": "CONST", "arg": {"value": float(len(heads)), "dtype": "float32"}})
    for k in range(40):
      prev = len(nodes) - 1
      nodes.append({"op": "NEG", "src": [prev]} if k % 3 == 2 else {"op": ("ADD", "MUL")[k % 3], "src": [prev, 0]})
    heads.append(len(nodes) - 1)
  while len(heads) > 1:
    nxt = []
    for a, b in zip(heads[::2], heads[1::2]):
      nodes.append({"op": "MAX", "src": [a, b]}); nxt.append(len(nodes) - 1)
    heads = nxt + ([heads[-1]] if len(heads) % 2 else [])
  return {"format": "tinyspec-graph", "version": 1, "nodes": nodes}


def members(g) -> set:
  """The nodes a chain box stands for (data-nodes: '2-41 2382')."""
  out = set()
  for part in (g.get("data-nodes") or "").split():
    a, _, b = part.partition("-")
    out |= set(range(int(a), int(b or a) + 1))
  return out


def test_a_100k_node_graph_is_collapsed_and_cut_at_the_limit(tmp_path):
  doc = big_graph(100_000)
  n = len(doc["nodes"])
  assert n >= 100_000
  p = tmp_path / "big.json"
  p.write_text(json.dumps(doc))
  out = tmp_path / "big.svg"
  assert main(["show", str(p), "-o", str(out)]) == 0
  svg = out.read_text()
  gs = svg_nodes(svg)
  assert 500 < len(gs) <= 1001                                   # the default limit, and the '… more' box
  chains = [g for g in gs if "chain" in g.get("class").split()]
  assert chains and all(g.get("data-nodes") for g in chains)
  blocks = [g for g in chains if "(ADD·MUL·NEG) ×13 +1" in "".join(g.itertext())]   # a block's 40 ops in one box
  assert blocks and all(len(members(g)) == 40 for g in blocks)
  (more,) = [g for g in gs if "more" in g.get("class").split()]
  shown = set()
  for g in gs:
    if g.get("data-node"): shown.add(int(g.get("data-node")))
    shown |= members(g)
  left = n - len(shown)
  assert f"… {left:,} more nodes" in "".join(more.itertext()) and f"{left:,} more nodes not shown" in svg
  assert str(n - 1) in {g.get("data-node") for g in gs}          # the root is drawn


def test_without_limit_and_collapse_every_node_is_a_box(tmp_path):
  p = tmp_path / "big.json"
  p.write_text(json.dumps(big_graph(5_000)))
  g = load_file(p)[0]
  pic = picture(g, limit=0, collapse="off")
  assert pic.hidden == 0 and pic.collapsed == 0
  assert sum(1 for it in pic.items if it.nodes[0] != 0) == len(g.nodes) - 1
  users = {c for c, nd in enumerate(g.nodes) if 0 in nd.src}
  assert sum(1 for it in pic.items if it.nodes == [0]) == len(users)          # the shared constant: beside each user
  ids = [it.id for it in pic.items]
  assert all(ids[e.dst] == f"n{ids[e.src].split('-u')[1]}" for e in pic.edges if ids[e.src].startswith("n0-"))
  on = picture(g, limit=0, collapse="on")
  assert on.hidden == 0 and on.collapsed > 0.9 * len(g.nodes) and len(on.items) < len(pic.items) / 5


def test_a_chain_stops_at_a_node_with_two_users(tmp_path):
  """NEG x12 from a constant, node 6 also read by a MUL: the run splits there (every edge
  out of a collapsed box still shows), short runs stay expanded, roots are never folded."""
  nodes = [{"op": "CONST", "arg": {"value": 2.0, "dtype": "float32"}}]
  for k in range(12): nodes.append({"op": "NEG", "src": [k]})
  nodes += [{"op": "MUL", "src": [6, 6]}, {"op": "ADD", "src": [12, 13]}]
  g = load_file(write(tmp_path, nodes))[0]
  pic = picture(g, collapse="on")
  runs = sorted(it.nodes for it in pic.items if it.kind == "chain")
  assert runs == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
  ids = [it.id for it in pic.items]
  assert {(ids[e.src], ids[e.dst]) for e in pic.edges} >= {("c1", "n13"), ("c1", "c7"), ("c7", "n14"), ("n13", "n14")}
  assert not any(it.kind == "chain" for it in picture(g).items)      # auto: a small graph stays expanded
  marked = picture(g, collapse="on", highlight={8: "see"})               # a highlighted node is never folded
  assert sorted(it.nodes for it in marked.items if it.kind == "chain") == [[1, 2, 3, 4, 5, 6], [9, 10, 11, 12]]


def test_focus_draws_the_neighbourhood_of_a_node(tmp_path):
  p = tmp_path / "big.json"
  p.write_text(json.dumps(big_graph(5_000)))
  pic = picture(load_file(p)[0], focus=2000, limit=50, collapse="off")
  assert any(it.nodes == [2000] for it in pic.items) and len(pic.items) <= 51
  assert any(it.nodes == [2001] for it in pic.items) and any(it.nodes == [1999] for it in pic.items)   # users and sources


def test_highlighted_nodes_are_marked_kept_and_annotated(tmp_path):
  p = tmp_path / "big.json"
  p.write_text(json.dumps(big_graph(5_000)))
  pic = picture(load_file(p)[0], limit=30, highlight={10: "first divergent node: got 0, expected -1"})
  (it,) = [it for it in pic.items if it.nodes == [10]]
  assert it.highlight and "first divergent node" in it.tip
  svg = render_svg(pic, id_prefix="case7-")
  assert 'id="case7-n10"' in svg and 'marker-end="url(#case7-arrow)"' in svg


def test_deeply_nested_bodies_are_drawn_flat_below_a_depth():
  """3,000 FUNCTIONs, each the body of the next: clusters stop nesting at MAX_DEPTH, and
  the picture is made in linear time (no recursion, no quadratic walk up the nesting)."""
  from tinyspec.graph import from_document
  from tinyspec.show.structure import MAX_DEPTH
  nodes = [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}]
  for _ in range(3000):
    p = len(nodes) - 1
    nodes += [{"op": "TUPLE", "src": [p]}, {"op": "FUNCTION", "src": [p + 1]}, {"op": "GETTUPLE", "src": [p + 2], "arg": 0}]
  g, _ = from_document({"nodes": nodes})
  pic = picture(g, limit=0)
  assert len(pic.clusters) == MAX_DEPTH and pic.exit_code == 0 and pic.hidden == 0
  svg_nodes(render_svg(picture(g)))


# ------------------------------------------------------------------ determinism
def test_the_same_graph_gives_the_same_bytes_in_every_process(tmp_path):
  graph = ROOT / "conformance/rules/ops/PROGRAM/valid-example.json"
  outs = []
  for seed in ("1", "2"):
    out = tmp_path / f"{seed}.svg"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    subprocess.run([sys.executable, "-m", "tinyspec", "show", str(graph), "-o", str(out)], env=env, check=True, timeout=120)
    outs.append(out.read_bytes())
  assert outs[0] == outs[1]


# ------------------------------------------------------------------ hostile text
HOSTILE = '</text></svg><script>alert(1)</script>]]>&amp;"\'\\N\\G\x00\x1b\ud800\ufffe'


def test_hostile_text_stays_text(tmp_path):
  p = tmp_path / "hostile.json"
  p.write_text(json.dumps({"nodes": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}, "name": HOSTILE[:100], "tag": {"x": HOSTILE}},
                                     {"op": "NEG", "src": [0], "tag": [HOSTILE]}, {"op": "FROBNICATE<x>".upper()[:9], "src": [1]}]}))
  g, diags = load_file(p)
  pic = picture(g, result=validate_file(p))
  svg = render_svg(pic)
  gs = svg_nodes(svg)                                  # parses: nothing broke out of the text
  assert "<script>" in title_of(gs[0])                  # ... and the text is still there, as text
  html = render_html(pic)
  assert html.count("<script") == 1                     # only the page's own
  dot = render_dot(pic)
  parse_dot(dot)
  assert "\x00" not in svg + html + dot and "\ud800" not in svg + html + dot
  if shutil.which("dot"):
    r = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    svg_nodes(r.stdout.decode())


def test_graphviz_reads_the_dot():
  if not shutil.which("dot"): pytest.skip("Graphviz (dot) is not installed: scripts/setup.sh installs it where it may")
  for path in (ROOT / "conformance/rules/CALL.body/valid-kernel.json", ROOT / "conformance/rules/ops/PROGRAM/valid-example.json",
               ROOT / "conformance/rules/RESHAPE.numel/invalid-6-to-2x4.json"):
    pic = picture(load_file(path)[0], result=validate_file(path))
    r = subprocess.run(["dot", "-Tsvg"], input=render_dot(pic).encode(), capture_output=True, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr.decode()
    titles = {"".join(t.itertext()) for t in ET.fromstring(r.stdout).iter(SVG + "title")}
    assert {it.id for it in pic.items} <= titles


# ------------------------------------------------------------------ command line
def test_formats_follow_the_suffix_or_the_flag(tmp_path, capsys):
  graph = str(ROOT / "conformance/rules/ops/ADD/valid-example.json")
  for name, head in (("a.svg", "<svg"), ("a.dot", "digraph"), ("a.gv", "digraph"), ("a.html", "<!DOCTYPE html>")):
    assert main(["show", graph, "-o", str(tmp_path / name)]) == 0
    assert (tmp_path / name).read_text().startswith(head)
  assert main(["show", graph, "--format", "dot", "-o", str(tmp_path / "x.txt")]) == 0
  assert (tmp_path / "x.txt").read_text().startswith("digraph")
  capsys.readouterr()
  assert main(["show", graph]) == 0 and capsys.readouterr().out.startswith("<svg")


@pytest.mark.parametrize("argv,fragment", [
  (["missing.json"], "cannot read file"),
  (["GRAPH", "-o", "x.png"], "cannot tell the format"),
  (["GRAPH", "--limit", "-1"], "--limit"),
  (["GRAPH", "--focus", "99"], "--focus 99"),
  (["GRAPH", "--stage", "2"], "--stage applies"),
  (["GRAPH", "-o", "no/such/dir/x.svg"], "cannot write"),
  (["GRAPH", "--format", "png"], "invalid choice"),
])
def test_bad_usage_exits_2_without_a_traceback(tmp_path, capsys, monkeypatch, argv, fragment):
  monkeypatch.chdir(tmp_path)
  graph = str(ROOT / "conformance/rules/ops/ADD/valid-example.json")
  try: rc = main(["show", *[graph if a == "GRAPH" else a for a in argv]])
  except SystemExit as e: rc = e.code                              # argparse's own usage errors
  text = "".join(capsys.readouterr())
  assert rc == 2 and fragment in text and "Traceback" not in text
  assert sorted(p.name for p in tmp_path.iterdir()) == []       # nothing written


def test_the_console_script_runs_show(tmp_path):
  graph = ROOT / "conformance/rules/ops/ADD/valid-example.json"
  r = subprocess.run([sys.executable, "-m", "tinyspec", "show", str(graph), "--format", "html"], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>") and not r.stderr
  r = subprocess.run([sys.executable, "-m", "tinyspec", "--help"], capture_output=True, text=True, timeout=120)
  assert "show" in r.stdout
