"""Several corpus cases as one graph, so that a compiler builds one program for all of them.

Only tensor-level cases whose roots are all values are merged: their nodes are
concatenated, every input BUFFER and PARAM outside function bodies gets a slot past the
previous cases' (the inputs are renamed to match), and the roots are listed in order;
`Merged.split()` maps the merged outputs back to each case's names. The runner merges
only as an optimization: a case that fails inside a batch is run again on its own, and
that run decides.
"""
from __future__ import annotations
import json
from dataclasses import dataclass, field
from pathlib import Path
from tinyspec.dispatch import input_name
from tinyspec.graph import Graph, Node, load_file
from tinyspec.tables import tables
from tinyspec.frozen import thaw
from tinyspec.files import read_text, FileRefused
from tinyspec.limits import limits


@dataclass
class Merged:
  graph: Graph
  inputs: dict = field(default_factory=dict)     # merged input name -> (path, dtype)
  outputs: dict = field(default_factory=dict)    # merged output name -> (case id, the case's output name)

  def split(self, got: dict) -> dict:
    """Merged outputs -> {case id: {output name: value}}."""
    out: dict = {}
    for name, v in got.items():
      base, _, sub = name.partition(".")
      key = self.outputs.get(base)
      if key is None: continue
      cid, cname = key
      out.setdefault(cid, {})[cname + ("." + sub if sub else "")] = v
    return out


def _outer(g: Graph) -> set[int]:
  """Nodes reachable from the roots without entering function bodies."""
  T = tables()
  seen, stack = set(), list(g.root_indices)
  while stack:
    i = stack.pop()
    if i in seen: continue
    seen.add(i)
    stack.extend(T.ops[g.nodes[i].op].open_src(g.nodes[i].src))
  return seen


def batchable(case) -> bool:
  """A positive tensor-level case whose outputs are all value roots (out{k}), with
  unnamed inputs."""
  if case.kind != "positive" or case.level != "tensor": return False
  if any(not k.startswith("out") for k in case.outputs): return False
  return not any(isinstance(n, dict) and isinstance(n.get("arg"), dict) and "name" in n["arg"] for n in _nodes_json(case))


def _nodes_json(case) -> list:
  try:
    d = json.loads(read_text(case.graph, limits().max_file_bytes, "the graph file"))
    nodes = d["nodes"] if isinstance(d, dict) else d
    if isinstance(nodes, list): return nodes
  except (FileRefused, ValueError, KeyError, TypeError, RecursionError):
    pass
  return [{"arg": {"name": "?"}}]   # unreadable: not batchable (its own run says why)


def merge(cases) -> Merged | None:
  """One graph for the cases (None when one of them cannot be merged)."""
  nodes: list[Node] = []
  roots: list[int] = []
  m = Merged(Graph([]))
  inputs_of = tables().input_ops
  free: dict = {}   # input op -> its first slot the merged graph has not used
  for c in cases:
    g, diags = load_file(c.graph)
    if g is None or any(d.fatal for d in diags): return None
    outer = _outer(g)
    base = len(nodes)
    offset, renamed = dict(free), {}   # this case's slots start past the previous cases'
    for i, n in enumerate(g.nodes):
      arg = n.arg
      if i in outer and n.op in inputs_of and isinstance(arg, dict):
        a = thaw(arg)
        a["slot"] += offset.get(n.op, 0)
        free[n.op] = max(free.get(n.op, 0), a["slot"] + 1)
        renamed[input_name(n.op, arg)] = input_name(n.op, a)
        arg = a
      nodes.append(Node(n.op, [j + base for j in n.src], thaw(arg), n.dtype, n.shape, n.tag, n.name))
    for name, (p, dt) in c.inputs.items():
      if name not in renamed: return None   # an input no outer BUFFER or PARAM of the graph takes
      m.inputs[renamed[name]] = (p, dt)
    for k, r in enumerate(g.root_indices):
      m.outputs[f"out{len(roots)}"] = (c.id, f"out{k}")
      roots.append(r + base)
  m.graph = Graph(nodes, roots, "tensor")
  return m


def write(m: Merged, folder: Path) -> Path:
  p = Path(folder) / "batch.json"
  p.write_text(m.graph.dumps())
  return p
