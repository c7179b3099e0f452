"""Building the case corpus from the tables (tools/gen_cases.py writes it).

Every op with tensor- or kernel-level semantics gets a positive case in every dtype its
slots allow, found from the tables alone:

* ops applied per element (categories elementwise and decomposed): BUFFERs of edge values
  (conformance.values) for each source, the cross product of the edge values when it is
  small; one root per arg value when the arg is a dtype (CAST: every target dtype); plus
  a broadcast case (size-1 axes) and an empty case in one dtype;
* every other op: its `example:` graph from ops.yaml, retyped: every leaf of the
  example's dtype becomes the case's dtype, inputs are filled with edge values, and an
  op whose arg is a dtype gets one root per dtype (BITCAST: every same-size target);
  plus an empty and a size-1 variant (the first dim of the example's buffers 0 or 1);
* templates (conformance/corpus/templates.yaml): extra graphs in the example form for dtypes or
  shapes an example cannot reach by retyping.

A retyped graph that the validator rejects is no case (the dtype is not allowed there);
the reference evaluator computes the expected outputs. Negative cases are the invalid
graphs of the rule corpus (conformance/rules), each with its rule id.
"""
from __future__ import annotations
import itertools
import zlib
from dataclasses import dataclass, field
from pathlib import Path
import os
import numpy as np
import yaml
from tinyspec.dispatch import input_name
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph, Node, from_document
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.conformance.corpus import values as V
from tinyspec.frozen import thaw
from tinyspec.conformance.run.compare import element_bounds
from tinyspec.tolerance import tolerance
from tinyspec import portable as P, validate as VM
from tinyspec.conformance.corpus.cases import write_case, CASES_DIR
from tinyspec.conformance.corpus.rulecases import load_rule_cases

GENERATOR_VERSION = 1
TEMPLATES = Path(__file__).resolve().parent / "templates.yaml"
MAX_ELEMENTS = 600   # cap on a cross product of edge values


@dataclass
class Draft:
  id: str
  graph: Graph
  inputs: dict = field(default_factory=dict)     # name -> array (in the dtype the graph needs)
  covers: list = field(default_factory=list)     # [(op, dtype)]
  description: str = ""


def value_dtypes() -> list[str]:
  return [n for n, d in DTYPES.items() if d.cls != "void"]


def _refs_dtype(schema, defs, seen=()) -> bool:
  """Whether an arg schema holds a dtype (the `dtype` def) anywhere."""
  if isinstance(schema, dict):
    ref = schema.get("$ref")
    if ref == "#/$defs/dtype": return True
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in seen:
      return _refs_dtype(defs.get(ref.split("/")[-1]), defs, seen + (ref,))
    return any(_refs_dtype(v, defs, seen) for v in schema.values())
  if isinstance(schema, list): return any(_refs_dtype(v, defs, seen) for v in schema)
  return False


def arg_is_dtype(op: str) -> bool:
  T = tables()
  return T.ops[op].arg_schema.get("$ref") == "#/$defs/dtype"


def primary_slot(op: str) -> int | None:
  """The slot whose dtype a case of op is named by: the slot the others' `same` refers
  to, else the first value slot that is not optional."""
  o = tables().ops[op]
  names = [s.name for s in o.slots]
  for s in o.slots:
    if isinstance(s.dtype, dict) and s.dtype.get("same") in names: return names.index(s.dtype["same"])
  for k, s in enumerate(o.slots):
    if s.kind == "value" and not s.optional: return k
  return None


def op_dtypes(op: str, example_dtype: str | None = None) -> list[str]:
  """The dtypes a case of op is made in: those its primary slot allows; for an op without
  value sources, every dtype when its arg holds one (CONST, BUFFER...) or when it passes
  on a value of some source (GETTUPLE: the validator then says which are allowed), else
  the dtype of its example's result (BINARY: uint8; void: one case)."""
  T = tables()
  o = T.ops[op]
  k = primary_slot(op)
  if k is not None:
    allowed = o.slots[k].allowed()
    return sorted(allowed, key=value_dtypes().index) if allowed is not None else value_dtypes()
  if _refs_dtype(o.arg_schema, T.defs): return value_dtypes()
  if o.slots and example_dtype in value_dtypes(): return value_dtypes()   # it passes a source's value on (GETTUPLE)
  return [example_dtype] if example_dtype else []


# ------------------------------------------------------------------ per-element ops
def _slot_dtypes(op: str, x: str) -> list[str] | None:
  o = tables().ops[op]
  k = primary_slot(op)
  out = []
  for j, s in enumerate(o.slots):
    if s.optional or s.kind != "value": break
    if j == k or (isinstance(s.dtype, dict) and s.dtype.get("same") == o.slots[k].name): out.append(x); continue
    allowed = s.allowed()
    if allowed is None or x in allowed: out.append(x)
    elif "bool" in allowed: out.append("bool")
    else: out.append(sorted(allowed)[0])
  return out


def _operand_arrays(dts: list[str], seed: int) -> list[np.ndarray]:
  """The cross product of the operands' edge values, or a fixed sample of it when large."""
  edges = [V.edge_values(d) for d in dts]
  total = int(np.prod([len(e) for e in edges]))
  if total <= MAX_ELEMENTS:
    combos = list(itertools.product(*[range(len(e)) for e in edges]))
  else:
    rng = np.random.default_rng(seed)
    combos = [tuple(int(rng.integers(len(e))) for e in edges) for _ in range(MAX_ELEMENTS)]
    combos[:min(len(e) for e in edges)] = [tuple(i for _ in edges) for i in range(min(len(e) for e in edges))]
  return [V.as_array([edges[j][c[j]] for c in combos], d) for j, d in enumerate(dts)]


def _buffer_inputs(arrays: list) -> dict:
  """The inputs of the BUFFERs _buffer made at slots 0, 1, ...: input name -> array."""
  return {input_name("BUFFER", {"slot": k}): a for k, a in enumerate(arrays)}


def _buffer(nodes, shape, dt, slot):
  nodes.append(Node("VCONST", [], {"values": list(shape), "dtype": "index"}))
  nodes.append(Node("BUFFER", [len(nodes) - 1], {"slot": slot, "dtype": dt, "device": "CPU"}))
  return len(nodes) - 1


def _args_for(op: str) -> list:
  return value_dtypes() if arg_is_dtype(op) else [None]


def _typed(dt: str) -> bool:
  """Does every compiler target have a type for dt (dtypes.yaml `c` and `cl`; the float8s do not)?"""
  return DTYPES[dt].c is not None and DTYPES[dt].cl is not None


def arg_sets(op: str, dt: str) -> list[tuple[str, list]]:
  """(case id suffix, the arg values) of op's cases in dtype dt: one case of every arg, but
  where dt is typed, the dtype args that are not go to a case of their own (`-untyped`),
  so a backend without them still runs the others."""
  args = _args_for(op)
  untyped = [a for a in args if a is not None and not _typed(a)]
  if not untyped or not _typed(dt): return [("", args)]
  return [("", [a for a in args if a not in untyped]), ("-untyped", untyped)]


def _per_element_graph(op: str, dts: list[str], shapes: list[tuple], args: list | None = None) -> Graph:
  nodes: list[Node] = []
  srcs = [_buffer(nodes, sh, d, k) for k, (sh, d) in enumerate(zip(shapes, dts))]
  roots = []
  for a in (_args_for(op) if args is None else args):
    nodes.append(Node(op, srcs, a)); roots.append(len(nodes) - 1)
  g = Graph(nodes, roots if roots != [len(nodes) - 1] else None)
  return _keep_valid_roots(g)


def _keep_valid_roots(g: Graph) -> Graph | None:
  """g with only the roots the validator accepts (an arg value the dtype does not allow
  drops out); None when none is left."""
  res = validate(g)
  if res.ok: return g
  bad = {d.node for d in res.diagnostics}
  roots = [r for r in g.root_indices if r not in bad]
  if not roots: return None
  keep = Graph.from_uops(*[g.uops()[r] for r in roots])
  return keep if validate(keep).ok else None


def per_element_drafts(op: str) -> list[Draft]:
  out = []
  first = None
  for x in op_dtypes(op):
    dts = _slot_dtypes(op, x)
    arrs = _operand_arrays(dts, seed=zlib.crc32(f"{op}/{x}".encode()))
    for suffix, args in arg_sets(op, x):
      g = _per_element_graph(op, dts, [a.shape for a in arrs], args)
      if g is None: continue
      first = first or (x, dts)
      out.append(Draft(f"{op}/{x}{suffix}", g, _buffer_inputs(arrs), [(op, x)],
                       f"{op} on {', '.join(dts)} edge values" + (" (cross product)" if len(dts) > 1 else "") + (" to the untyped dtypes" if suffix else "")))
  if first is not None:
    x, dts = first
    # size-1 axes broadcast against each other, and an empty operand
    shapes = [(3, 1) if k % 2 == 0 else (1, 4) for k in range(len(dts))]
    arrs = [V.cycle(V.edge_values(d), d, int(np.prod(sh))).reshape(sh) for d, sh in zip(dts, shapes)]
    args = arg_sets(op, x)[0][1]
    g = _per_element_graph(op, dts, shapes, args)
    if g is not None: out.append(Draft(f"{op}/{x}-broadcast", g, _buffer_inputs(arrs), [(op, x)], f"{op}: (3,1) against (1,4)"))
    g = _per_element_graph(op, dts, [(0,)] * len(dts), args)
    if g is not None: out.append(Draft(f"{op}/{x}-empty", g, _buffer_inputs([V.cycle((), d, 0) for d in dts]), [(op, x)], f"{op} on empty operands"))
  return out


# ------------------------------------------------------------------ examples and templates
def _op_node(g: Graph, op: str) -> int | None:
  idx = [i for i, n in enumerate(g.nodes) if n.op == op]
  return idx[-1] if idx else None


def _primary_dtype(g: Graph, op: str, views) -> str | None:
  i = _op_node(g, op)
  k = primary_slot(op)
  n = g.nodes[i]
  if k is not None and k < len(n.src): return views[n.src[k]].dtype
  return views[i].dtype if isinstance(views[i].dtype, str) else None


def retype(g: Graph, old: str, new: str) -> Graph:
  """g with every leaf of dtype `old` (an arg holding `dtype: old`) made of dtype `new`,
  its constant values converted."""
  nodes = []
  for n in g.nodes:
    a = n.arg
    if isinstance(a, dict) and a.get("dtype") == old and old != new:
      a = thaw(a); a["dtype"] = new
      if "value" in a: a["value"] = V.const_json(V.convert(a["value"], new), new)
      if "values" in a: a["values"] = [V.const_json(V.convert(v, new), new) for v in a["values"]]
    nodes.append(Node(n.op, n.src, a, n.dtype, n.shape, n.tag, n.name))
  return Graph(nodes, g.roots, g.level, dict(g.meta))


def _enumerate_arg(g: Graph, op: str, args: list, keep: bool = True) -> Graph | None:
  """When op's arg is a dtype and op is the graph's one root: one root per dtype of args
  (none valid: g itself where `keep`, else None)."""
  i = _op_node(g, op)
  if not arg_is_dtype(op) or g.root_indices != [i]: return g if keep else None
  nodes = list(g.nodes[:i]) + list(g.nodes[i + 1:])
  if any(i in n.src for n in nodes): return g if keep else None
  n = g.nodes[i]
  roots = []
  for a in args:
    nodes.append(Node(op, n.src, a)); roots.append(len(nodes) - 1)
  return _keep_valid_roots(Graph(nodes, roots, g.level)) or (g if keep else None)


def _resize_first_dims(g: Graph, dim: int) -> Graph:
  """The first dim of every buffer (BUFFER/PARAM: a source op with a shape slot) made `dim`."""
  T = tables()
  target = set()
  for n in g.nodes:
    o = T.ops[n.op]
    if o.category != "source": continue
    for k, j in enumerate(n.src):
      if k < len(o.slots) and o.slots[k].kind == "shape" and g.nodes[j].op == "VCONST" and g.nodes[j].arg["values"]: target.add(j)
  nodes = []
  for i, n in enumerate(g.nodes):
    if i in target:
      a = thaw(n.arg); a["values"][0] = dim
      n = Node(n.op, n.src, a)
    nodes.append(n)
  return Graph(nodes, g.roots, g.level, dict(g.meta))


def input_names(g: Graph, views) -> dict[str, int]:
  """The graph's inputs: input name -> node (BUFFERs, global PARAMs; a symbolic size is
  an input too)."""
  out = {}
  T = tables()
  seen, stack = set(), list(g.root_indices)   # the nodes outside function bodies (their PARAMs are bound)
  while stack:
    i = stack.pop()
    if i in seen: continue
    seen.add(i)
    stack.extend(T.ops[g.nodes[i].op].open_src(g.nodes[i].src))
  for i, n in enumerate(g.nodes):
    if i not in seen or n.op not in T.input_ops or views[i] is None: continue
    if views[i].addrspace not in (None, "GLOBAL"): continue
    out[input_name(n.op, n.arg)] = i
  return out


def fill_inputs(g: Graph, views, salt: int = 0) -> dict:
  """Edge values for every input of g (a symbolic size: its max)."""
  out = {}
  for name, i in sorted(input_names(g, views).items()):
    v = views[i]
    dt = v.dtype
    if len(g.nodes[i].src) == 3:
      out[name] = V.as_array([v.min_max[1]], dt).reshape(()); continue
    n = int(np.prod(v.shape)) if v.shape else 1
    e = V.edge_values(dt)
    e = e[salt % len(e):] + e[:salt % len(e)]
    out[name] = V.cycle(e, dt, n).reshape(v.shape)
  return out


def _reachable(g: Graph) -> Graph:
  return Graph.from_uops(*g.root_uops(), level=g.level, meta=g.meta)


def graph_drafts(op: str, base: Graph, tag: str, description: str, variants: bool = True) -> list[Draft]:
  """Cases of op from one graph in example form: retyped into every dtype of op."""
  res = validate(base)
  if not res.ok or _op_node(base, op) is None: return []
  d0 = _primary_dtype(base, op, res.views)
  out, first = [], None
  for x in op_dtypes(op, d0):
    if d0 is None and x != res.views[_op_node(base, op)].dtype: continue
    g = retype(base, d0, x) if d0 is not None else base
    if x != d0 and g.dumps() == base.dumps(): continue   # nothing of the example has dtype d0 to retype
    for suffix, args in arg_sets(op, x):
      if (draft := _example_draft(op, _enumerate_arg(g, op, args, keep=not suffix), f"{op}/{x}{tag}{suffix}", x, description)) is None: continue
      first = first or (x, draft.graph)
      out.append(draft)
  if variants and first is not None:
    x, g = first
    for dim, name in ((0, "empty"), (1, "size1")):
      v = _resize_first_dims(g, dim)
      r = validate(v)
      if not r.ok or v.dumps() == g.dumps(): continue
      out.append(Draft(f"{op}/{x}{tag}-{name}", v, fill_inputs(v, r.views), [(op, x)], f"{description}, first dims {dim}"))
  return out


def _example_draft(op: str, g: Graph | None, name: str, x: str, description: str) -> Draft | None:
  if g is None: return None
  r = validate(g)
  if not r.ok: return None
  g = _reachable(g)
  r = validate(g)
  if not r.ok or _op_node(g, op) is None: return None
  return Draft(name, g, fill_inputs(g, r.views, zlib.crc32(x.encode())), [(op, x)], description)


def example_drafts(op: str) -> list[Draft]:
  ex = tables().ops[op].example
  if not ex: return []
  g, diags = from_document(ex)
  if g is None or any(d.fatal for d in diags): return []
  return graph_drafts(op, g, "", f"the example of {op} from spec/ops.yaml, retyped")


def template_drafts(op: str) -> list[Draft]:
  """Cases from conformance/corpus/templates.yaml (graphs in example form)."""
  out = []
  for k, t in enumerate(load_templates().get(op, [])):
    g, diags = from_document(t["nodes"])
    if g is None or any(d.fatal for d in diags): raise ValueError(f"templates.yaml {op}[{k}]: unreadable graph")
    if t.get("roots") is not None: g = Graph(g.nodes, list(t["roots"]), g.level)
    got = graph_drafts(op, g, f"-{t['name']}", t.get("description", f"template {t['name']}"), variants=False)
    if not got: raise ValueError(f"templates.yaml {op}[{k}] ({t['name']}): no dtype gives a valid graph")
    out += got
  return out


def load_templates() -> dict:
  if not TEMPLATES.is_file(): return {}
  return yaml.safe_load(TEMPLATES.read_text()).get("ops", {}) or {}


def case_ops() -> list[str]:
  """The ops a corpus covers: trusted ops with tensor- or kernel-level semantics."""
  from tinyspec.refimpl import supported_ops  # noqa: PLC0415 (start-up time: the runner reads input names here without loading the reference)
  sup = supported_ops()
  T = tables()
  return [n for n, o in T.ops.items() if not o.untrusted and sup.get(n, set()) & {"tensor", "kernel"}]


def all_drafts(ops: list[str] | None = None) -> list[Draft]:
  T = tables()
  out = []
  for op in ops or case_ops():
    drafts = per_element_drafts(op) if op in T.alu_ops else example_drafts(op)   # an ALU op applies per element
    have = {d.id for d in drafts}
    drafts += [d for d in template_drafts(op) if d.id not in have]
    out += drafts
  return out


# ------------------------------------------------------------------ expected outputs
def output_dtypes(g: Graph, views) -> dict[str, str]:
  """Output name -> dtype, as refimpl names outputs."""
  out = {}
  names = input_names(g, views)
  for k, r in enumerate(g.root_indices):
    dt = views[r].dtype
    if isinstance(dt, tuple):   # a tuple value: out{k}.{j}
      for j, d in enumerate(dt): out[f"out{k}.{j}"] = d
    else: out[f"out{k}"] = dt
  for name, i in names.items(): out.setdefault(name, views[i].dtype)
  return out


def output_shapes(g: Graph, views) -> dict[str, tuple]:
  """Output name -> the derived shape (as output_dtypes names them)."""
  out = {}
  for k, r in enumerate(g.root_indices):
    if isinstance(views[r].dtype, tuple):
      for j, sh in enumerate(views[r].shape): out[f"out{k}.{j}"] = sh
    else: out[f"out{k}"] = views[r].shape
  for name, i in input_names(g, views).items(): out.setdefault(name, views[i].shape)
  return out


def _value_srcs(g: Graph, i: int) -> list[int]:
  o = tables().ops[g.nodes[i].op]
  return [j for k, j in enumerate(g.nodes[i].src) if o.slot_for(k).kind == "value"]


def expected(d: Draft) -> tuple[dict, dict]:
  """(outputs, bounds): the reference evaluator's outputs and for each its (ulp,
  ulp_decomposed, portable) bounds: the strict profile's, and the portable profile's
  {ulp, ulp_decomposed, alternatives} (tinyspec.portable)."""
  from tinyspec.refimpl import evaluate  # noqa: PLC0415 (start-up time: the runner reads input names here without loading the reference)
  res = validate(d.graph)
  r = evaluate(d.graph, d.inputs, trace=True)
  dts = output_dtypes(d.graph, res.views)
  roots = d.graph.root_indices
  inexact = {n.op for n, v in zip(d.graph.nodes, res.views) if isinstance(v.dtype, str) and DTYPES[v.dtype].cls == "float"}
  present = {n.op for n in d.graph.nodes}
  variant_outs: dict = {}
  def variant(name):   # the whole graph evaluated with one alternative semantics
    if name not in variant_outs:
      try: variant_outs[name] = evaluate(d.graph, d.inputs, variants=[name])
      except Exception: variant_outs[name] = {}
    return variant_outs[name]
  bounds = {}
  for name, val in r.outputs.items():
    dt = dts[name]
    if name in dts and name.startswith("out") and name[3:].isdigit() and int(name[3:]) < len(roots):
      i = roots[int(name[3:])]
      n = d.graph.nodes[i]
      ops = [r.values.get(j) for j in _value_srcs(d.graph, i)]
      ops = ops if all(isinstance(x, np.ndarray) for x in ops) else []
      strict = tuple(element_bounds(n.op, n.arg, dt, ops, val, dec) for dec in (False, True))
      port = [element_bounds(n.op, n.arg, dt, ops, val, dec, "portable") for dec in (False, True)]
      axes = tuple((n.arg or {}).get("axes") or ()) if isinstance(n.arg, dict) else ()
      alts, names = [], []
      for k in (0, 1):
        port[k], a, nm = P.alternatives(n.op, n.arg, dt, ops, val, port[k], axes)
        if k == 0: alts, names = a, nm
      names += [v for v in sorted(P.variants()) if v not in names and any(op in P.variant_scope(v) for op in present)]
    else:   # a stored buffer: the loosest bound of the float ops that may have computed it
      strict = tuple(max([tolerance(op, dt, dec)[0] for op in inexact] + [0.0]) if DTYPES[dt].cls == "float" else 0.0 for dec in (False, True))
      port = [max([tolerance(op, dt, dec, "portable")[0] for op in inexact] + [0.0]) if DTYPES[dt].cls == "float" else 0.0 for dec in (False, True)]
      if DTYPES[dt].cls == "float" and any(r == "zero" for op in present for _, e in P.entries(op) for r in e.get("results", ())):
        port = [max(b, P.ZERO_SIGN) for b in port]
      alts, names = [], [v for v in sorted(P.variants()) if any(op in P.variant_scope(v) for op in present)]
    for v in names:
      got = variant(v).get(name)
      if got is not None and np.asarray(got).shape == np.shape(val) and np.asarray(got).tobytes() != np.asarray(val).tobytes(): alts.append(np.asarray(got))
    bounds[name] = (*strict, {"ulp": port[0], "ulp_decomposed": port[1], "alternatives": alts})
  return dict(r.outputs), bounds


def levels_used(g: Graph) -> dict[str, list[str]]:
  """op -> the levels the graph uses it at."""
  T = tables()
  res = validate(g)
  top = res.level
  try: ctx = VM._contexts(g, top, {n.op for n in g.nodes}, T)
  except Exception: ctx = None
  out: dict[str, set] = {}
  for i, n in enumerate(g.nodes):
    lvs = {top} if ctx is None else {lv for lv in VM.LEVELS if ctx[i] & VM._BIT[lv]}
    out.setdefault(n.op, set()).update(lvs)
  return {k: sorted(v) for k, v in sorted(out.items())}


def devices_used(g: Graph) -> list[str]:
  out = set()
  for n in g.nodes:
    a = n.arg
    dev = a.get("device") if isinstance(a, dict) else None
    if isinstance(dev, str): out.add(dev)
    elif isinstance(dev, (tuple, list)): out.update(dev)
  return sorted(out)


# ------------------------------------------------------------------ writing the corpus
def write_draft(d: Draft, root: Path, folder: Path | None = None, tool: str = "tools/gen_cases.py") -> dict:
  """Evaluate a draft and write it as a positive case under root/<id>/ (or `folder`; a
  draft without an id gets its id from its folder when read, conformance/cases/README.md)."""
  res = validate(d.graph)
  outs, bounds = expected(d)
  dts = output_dtypes(d.graph, res.views)
  shapes = output_shapes(d.graph, res.views)
  for k, v in outs.items():   # the evaluator's value must have the validator's shape, or the case would pin a bug
    if k in shapes and tuple(np.shape(v)) != tuple(shapes[k]):
      raise ValueError(f"the reference evaluator gives {k} shape {np.shape(v)}, the validator derives {tuple(shapes[k])}")
  meta = {"id": d.id, "kind": "positive", "description": d.description, "level": res.level,
          "ops": sorted({n.op for n in d.graph.nodes}), "covers": [list(c) for c in d.covers],
          "dtypes": sorted({v.dtype for v in res.views if isinstance(v.dtype, str) and v.dtype != "void"}),
          "devices": devices_used(d.graph), "uses": levels_used(d.graph),
          "generator": {"tool": tool, "version": GENERATOR_VERSION}}
  if not d.id: del meta["id"]
  g = Graph(d.graph.nodes, d.graph.roots, d.graph.level, {"ops": meta["ops"]})
  names = input_names(d.graph, res.views)
  inputs = {k: (v, res.views[names[k]].dtype) for k, v in d.inputs.items()}
  outputs = {k: (v, dts[k], *bounds[k]) for k, v in outs.items()}
  return write_case(folder or root / d.id, meta, g.dumps(), inputs, outputs)


def uniform(d: Draft) -> Draft:
  """d with every input filled with one value (its dtype's third edge value: 1 or -1)."""
  ins = {}
  for k, a in d.inputs.items():
    b = np.empty_like(a)
    if b.size: b[...] = a.reshape(-1)[min(2, a.size - 1)]
    ins[k] = b
  return Draft(d.id, d.graph, ins, d.covers, d.description + " (every input holds one value)")


def negative_metas(root: Path) -> list[tuple[Path, dict, Path]]:
  """A negative case per invalid graph of the rule corpus: (folder, metadata, graph file)."""
  out = []
  for c in load_rule_cases():
    if c.valid: continue
    folder = root / "negative" / c.id
    meta = {"id": f"negative/{c.id}", "kind": "negative", "description": c.description or f"breaks {c.expect_rule}",
            "graph": os.path.relpath(c.input, CASES_DIR / "negative" / c.id).replace(os.sep, "/"),   # the corpus sits beside conformance/rules
            "level": c.level, "ops": sorted(c.ops()),
            "expect": {"rule": c.expect_rule, "node": c.node, "exit": c.exit, "only": c.only},
            "generator": {"tool": "tools/gen_cases.py", "version": GENERATOR_VERSION}}
    out.append((folder, meta, c.input))
  return out


def write_corpus(root: Path, ops: list[str] | None = None, log=None) -> int:
  """Write every case under root (which should be empty). Returns the number of cases."""
  n = 0
  from tinyspec.refimpl import EvalError  # noqa: PLC0415 (start-up time: the runner reads input names here without loading the reference)
  for d in all_drafts(ops):
    try:
      try: write_draft(d, root)
      except EvalError:
        # some ops refuse arbitrary data (REPLICATED: the slices must agree): the same
        # graph on inputs that hold one value each
        write_draft(uniform(d), root)
    except Exception as e:   # an evaluator refusal means no case, said loudly
      if log: log(f"{d.id}: not written ({type(e).__name__}: {str(e)[:200]})")
      continue
    n += 1
  if ops is None:
    for folder, meta, graph in negative_metas(root):
      write_case(folder, meta, None, {}, {}, graph_file=graph); n += 1
  return n
