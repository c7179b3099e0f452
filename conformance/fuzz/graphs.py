"""Hypothesis strategies for tinyspec graphs, drawn from the tables.

    from tinyspec.conformance.fuzz.graphs import graphs, invalid_graphs
    @given(graphs("tensor"))            # valid by construction; .graph, .inputs, .outputs
    @given(invalid_graphs("tensor"))    # .graph breaks .rule at .node

`graphs(level)` builds a graph node by node. Each step picks an op the tables allow at
the level (spec/ops.yaml `levels`, not untrusted, required sources of kind value or shape
only, minus the `skip` list of conformance/fuzz/strategies.yaml), fills its slots in order (a
`same` slot takes the dtype of the slot it names; a value slot takes a node already drawn
or a fresh leaf of a dtype its group allows, broadcastable with the op's other sources
when the op applies per element; optional slots sometimes; variadic ones 1 to 3 times),
draws its shape operands and arg (the named draw forms of strategies.yaml where an op's
checks constrain them: permutations, reshapes, pads...; else from the arg's JSON Schema)
and keeps the node only if the validator's node check (tinyspec.validate.check_node)
accepts it. Leaves are BUFFERs (tensor level) or INDEX(PARAM, RANGE) loads (kernel
level: one loop over n elements) and CONSTs, their values mixed from the dtype's edge
values and random ones; a fresh leaf of an op with a `domain` in ops.yaml `tolerances`
is moved into the domain where it can be. Every op node is an output (a root at tensor
level, a STORE into its own PARAM at kernel level), so a backend's value of every node
can be checked on its own (conformance/fuzz/checks.py). Hypothesis shrinks toward fewer
steps, earlier ops and simpler values; `Drawn.minimal(node)` keeps only a node and what
it reads (the dead nodes go).

`invalid_graphs(level)` draws a valid graph and breaks it with one mutation of the
`mutations` table of strategies.yaml, tagged with the rule id it must break; mutations
touch only a node nothing else reads, so no other node's rules change.

Passing `tables=` (a tinyspec.tables.Tables) draws from other tables: an op added to
ops.yaml is drawn without a change here.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
import numpy as np
import yaml
from hypothesis import strategies as st
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph, Node
from tinyspec.frozen import thaw
from tinyspec.conformance.corpus import values as V

HINTS_FILE = Path(__file__).resolve().parent / "strategies.yaml"
PER_ELEMENT = ("elementwise", "decomposed")   # categories whose ops broadcast their value sources


@lru_cache(maxsize=None)
def hints() -> dict:
  return yaml.safe_load(HINTS_FILE.read_text())


def _tables(T):
  if T is not None: return T
  from tinyspec.tables import tables
  return tables()


def value_dtypes() -> list[str]:
  return [n for n, d in DTYPES.items() if d.cls != "void"]


# ------------------------------------------------------------------ values
# A bug that shows at one value pair in a hundred is found only if the inputs are big
# enough and the special values common enough: arrays hold up to MAX_ELEMENTS elements,
# each an edge value, a special value (NaN, infinities, signed zeros, extremes; about one
# float element in ten is NaN), a small number or any number of the dtype.
# Hypothesis tries the all-zero choice first and shrinks toward it, so zero choices draw
# a useful example (dims of MAX_LEAF_DIM, an edge-dense fill seeded by the leaf) rather
# than an empty or one-element one; every other choice shrinks toward the small.
MAX_DIM = 4           # the dims EXPAND draws for a size-1 axis
MAX_LEAF_DIM = 8      # the dims of a drawn input: 1 to 8 (the zero choice: 8)
MAX_ELEMENTS = 96     # an input's elements at most (dims are halved until it fits)
ZERO_STEPS = 3        # ops in the zero choice's graph
KERNEL_LENGTH = 32    # a drawn kernel's loop runs 1 to 2 * KERNEL_LENGTH times (the zero choice: 32)


def values(dt: str):
  """Python numbers of dtype dt: edge values, special values and random ones."""
  d = DTYPES[dt]
  if d.cls == "bool": return st.booleans()
  edges, special = st.sampled_from(V.edge_values(dt)), st.sampled_from(V.special_values(dt))
  if d.cls == "float":
    big, _, _ = V.float_limits(dt)
    rnd = st.one_of(st.floats(-8, 8, allow_nan=False, width=64), st.floats(-big, big, allow_nan=False, allow_infinity=False))
    return st.one_of(edges, special, rnd.map(lambda v: V.convert(v, dt)))
  return st.one_of(edges, special, st.integers(max(int(d.min), -20), min(int(d.max), 20)), st.integers(int(d.min), int(d.max)))


DRAWN_ELEMENTS = 8    # arrays this small may have every element drawn (and shrunk) by Hypothesis


def arrays(dt: str, shape: tuple, salt: int = 0):
  """Arrays of dt: an edge-dense fill from a drawn seed (V.edge_dense; mixed with `salt`,
  so two leaves of one graph differ at the zero choice), or, for at most DRAWN_ELEMENTS
  elements, every element drawn. (Drawing each element of larger arrays overruns
  Hypothesis's choice buffer: it then discards the example and draws again, slowly.)"""
  n = int(np.prod(shape)) if shape else 1
  key = salt % 2**64   # a seed entropy word is never negative (a negative --seed makes a negative salt)
  fill = st.integers(0, 2**32 - 1).map(lambda k: V.edge_dense(dt, n, np.random.default_rng([k, key])).reshape(shape))
  if n > DRAWN_ELEMENTS: return fill
  return st.one_of(fill, st.lists(values(dt), min_size=n, max_size=n).map(lambda vs: V.as_array(vs, dt).reshape(shape)))


def _fit(dims: list) -> tuple:
  """dims with the largest halved until the product is at most MAX_ELEMENTS."""
  dims = list(dims)
  while int(np.prod(dims)) > MAX_ELEMENTS: k = dims.index(max(dims)); dims[k] = (dims[k] + 1) // 2
  return tuple(dims)


def shapes(max_rank: int = 3):
  """Shapes of useful size: rank 1 to 3 mostly (0 in about one draw in seven), dims 1 to
  8 (0, an empty axis, in about one in seventeen), at most MAX_ELEMENTS elements. The
  zero choice (Hypothesis's first example and its shrink target) is 8 x 8."""
  ranks = [r for r in (2, 1, 3, 1, 2, 3, 0) if r <= max_rank] or [0]
  # k = 0 is the largest dim; k = 11 (not a bound, which Hypothesis draws often) the empty axis
  dim = st.integers(0, 2 * MAX_LEAF_DIM).map(lambda k: 0 if k == 11 else 1 + (k - 1) % MAX_LEAF_DIM)
  return st.sampled_from(ranks).flatmap(lambda r: st.lists(dim, min_size=r, max_size=r)).map(_fit)


# ------------------------------------------------------------------ drawn graphs
@dataclass
class Drawn:
  graph: Graph
  inputs: dict = field(default_factory=dict)     # input name -> array
  level: str = "tensor"
  outputs: dict = field(default_factory=dict)    # output name -> the node whose value it holds
  values: dict = field(default_factory=dict)     # node -> known value (leaves: their inputs, scalars)
  tables: object = field(default=None, repr=False, compare=False)   # the Tables drawn from (None: the shipped ones)

  def __repr__(self):   # what Hypothesis prints of an example: the graph, the inputs' shapes
    ins = ", ".join(f"{k}: {v.dtype} {tuple(v.shape)}" for k, v in self.inputs.items())
    return f"Drawn({self.level}, {len(self.graph.nodes)} nodes, inputs {{{ins}}}, outputs {self.outputs})"

  def nodes_of_outputs(self) -> dict[int, str]:
    return {i: k for k, i in self.outputs.items()}

  def minimal(self, node: int) -> "Drawn":
    """The graph of `node` and the nodes it reads (every op node among them an output),
    with only the inputs they use: what a failing case is reported as."""
    keep = self._closure([node])
    return self._restrict(keep, [i for i in sorted(keep) if i in self.nodes_of_outputs()])

  def outputs_only(self, out_nodes: list) -> "Drawn":
    """The graph of the given output nodes and what they read; dead nodes gone."""
    return self._restrict(self._closure(out_nodes), sorted(out_nodes))

  def _closure(self, start) -> set:
    keep, stack = set(), list(start)
    while stack:
      i = stack.pop()
      if i in keep: continue
      keep.add(i)
      stack.extend(self.graph.nodes[i].src)
    return keep

  def _restrict(self, keep: set, out_nodes: list) -> "Drawn":
    if self.level == "kernel": return _rebuild_kernel(self, keep, out_nodes)
    order = sorted(keep)
    new = {old: k for k, old in enumerate(order)}
    nodes = [Node(n.op, [new[j] for j in n.src], thaw(n.arg)) for n in (self.graph.nodes[i] for i in order)]
    roots = [new[i] for i in out_nodes]
    used = {_input_name(self.graph.nodes[i]) for i in order if self.graph.nodes[i].op in ("BUFFER", "PARAM")}
    return Drawn(Graph(nodes, roots if roots != [len(nodes) - 1] else None, self.level),
                 {k: v for k, v in self.inputs.items() if k in used}, self.level,
                 {f"out{k}": new[i] for k, i in enumerate(out_nodes)}, {new[i]: v for i, v in self.values.items() if i in new}, self.tables)


def _input_name(n: Node) -> str:
  a = n.arg
  return a.get("name") or (f"buf{a['slot']}" if n.op == "BUFFER" else f"param{a['slot']}")


class _Builder:
  """A graph under construction: nodes, their Views, the inputs and known values."""

  def __init__(self, T, level: str, dtypes=None, salt: int = 0):
    self.T, self.level = T, level
    self.dtypes = set(dtypes) if dtypes is not None else set(value_dtypes())
    self.nodes: list[Node] = []
    self.views: list = []
    self.inputs: dict = {}
    self.known: dict = {}       # node -> its value where it is known without running (leaves)
    self.memo: dict = {}
    self.leaves: set = set()    # nodes that are inputs or constants (not outputs)
    self.helpers: set = set()   # structure (shape operands, loop, loads)
    self.slots = {"buf": 0, "param": 0}
    self.n = 1                  # kernel level: the loop's length
    self.salt = salt            # mixed into the seed of every fill (fuzz rounds differ at the zero choice)
    self.range = None

  def add(self, op: str, src: list, arg=None, level: str | None = None):
    from tinyspec.validate import check_node
    v = check_node(op, [self.views[j] for j in src], arg, level=level or self.level, tables=self.T, index=len(self.nodes))
    if isinstance(v, list): return None
    self.nodes.append(Node(op, list(src), arg))
    self.views.append(v)
    return len(self.nodes) - 1

  def shape_node(self, dims) -> int:
    key = ("shape", tuple(dims))
    if key not in self.memo:
      self.memo[key] = self.add("VCONST", [], {"values": [int(d) for d in dims], "dtype": "index"})
      self.helpers.add(self.memo[key])
    return self.memo[key]

  def const(self, value, dt: str) -> int:
    arg = {"value": V.const_json(value, dt), "dtype": dt}
    i = self.add("CONST", [], arg)
    if i is None: raise AssertionError(f"CONST {arg} refused")
    self.leaves.add(i)
    self.known[i] = V.as_array([value], dt).reshape(())
    return i

  def leaf(self, data, dt: str, shape: tuple) -> int:
    """A fresh value leaf: a CONST (shape ()) or an input."""
    if (shape == () or self.level == "kernel") and data.draw(st.integers(0, 3)) == 3:
      return self.const(data.draw(values(dt)), dt)
    if self.level == "kernel": return self._load(data, dt)
    arr = data.draw(arrays(dt, shape, self.salt * 1000 + len(self.nodes)))
    slot = self.slots["buf"]; self.slots["buf"] += 1
    i = self.add("BUFFER", [self.shape_node(shape)], {"slot": slot, "dtype": dt, "device": "CPU"})
    self.inputs[f"buf{slot}"] = arr
    self.known[i] = arr
    self.leaves.add(i)
    return i

  def _load(self, data, dt: str) -> int:
    arr = data.draw(arrays(dt, (self.n,), self.salt * 1000 + len(self.nodes)))
    slot = self.slots["param"]; self.slots["param"] += 1
    p = self.add("PARAM", [self.shape_node((self.n,))], {"slot": slot, "dtype": dt})
    i = self.add("INDEX", [p, self.range])
    self.inputs[f"param{slot}"] = arr
    self.helpers.add(p)
    self.known[i] = arr
    self.leaves.add(i)
    return i

  def value_nodes(self) -> list[int]:
    return [i for i, v in enumerate(self.views) if i not in self.helpers and isinstance(v.dtype, str) and v.dtype != "void"
            and (self.level != "kernel" or v.shape == ())]


def drawable_ops(level: str, T=None, ops=None) -> list[str]:
  """Ops the strategies draw at level: allowed there, trusted, not leaves, sources of
  kind value or shape only, not in strategies.yaml `skip` (ops: restrict to these)."""
  T = _tables(T)
  skip = hints().get("skip", {})
  out = []
  for name, o in T.ops.items():
    if ops is not None and name not in ops: continue
    if level not in o.levels or o.untrusted or o.category == "source" or name in skip: continue
    need = [s for s in o.slots if not s.optional and not (s.variadic and s.min_count == 0)]   # slots that must be filled
    if not need or any(s.kind not in ("value", "shape") for s in need): continue
    if level == "kernel" and any(s.kind == "shape" for s in need): continue
    out.append(name)
  return out


def _bcast(a: tuple, b: tuple):
  try: return tuple(np.broadcast_shapes(a, b))
  except ValueError: return None


def _value_source(data, b: _Builder, allowed, want_shape, per_element: bool, taken=()) -> int:
  """A node of a dtype in `allowed`: one already drawn (broadcastable with want_shape
  when the op applies per element) or a fresh leaf. A node the op already reads
  (`taken`) is drawn again only now and then: x op x hides most bugs (x // x is 1)."""
  reuse = not taken or data.draw(st.integers(0, 7)) == 0
  pool = [i for i in b.value_nodes() if b.views[i].dtype in allowed and (reuse or i not in taken)
          and (not per_element or want_shape is None or _bcast(want_shape, b.views[i].shape) is not None)]
  if pool and data.draw(st.integers(0, 2)) > 0:
    return data.draw(st.sampled_from(pool))
  dt = data.draw(st.sampled_from(_rotated(list(allowed), b.salt + len(b.nodes))))   # the zero choice varies with the salt
  if b.level == "kernel": shape = ()
  elif want_shape is not None and per_element:
    shape = tuple(1 if data.draw(st.integers(0, 6)) == 3 else d for d in want_shape)   # sometimes a size-1 axis that broadcasts
  else: shape = data.draw(shapes())
  return b.leaf(data, dt, shape)


def _allowed(slot, chosen: dict, dtypes: set) -> list[str] | None:
  if isinstance(slot.dtype, dict):
    d = chosen.get(slot.dtype.get("same"))
    return [d] if d else None
  a = slot.allowed()
  return [x for x in value_dtypes() if x in dtypes and (a is None or x in a)]


# -- shape operands and args: the draw forms of strategies.yaml
def _reshape(data, src: tuple) -> list[tuple]:
  n = int(np.prod(src)) if src else 1
  cands = [(n,), (1, n), (n, 1)] + [(f, n // f) for f in range(2, n) if n % f == 0] + ([()] if n == 1 else [])
  return [data.draw(st.sampled_from(cands))]


def _expand(data, src: tuple) -> list[tuple]:
  return [tuple(data.draw(st.integers(0, MAX_DIM)) if d == 1 else d for d in src)]


def _pad(data, src: tuple) -> list[tuple]:
  o = tuple(data.draw(st.integers(0, 2)) for _ in src)
  return [o, tuple(d + k + data.draw(st.integers(0, 2)) for d, k in zip(src, o))]


def _shrink(data, src: tuple) -> list[tuple]:
  o = tuple(data.draw(st.integers(0, d)) for d in src)
  return [o, tuple(data.draw(st.integers(0, d - k)) for d, k in zip(src, o))]


SHAPE_FORMS = {"reshape": _reshape, "expand": _expand, "pad": _pad, "shrink": _shrink}


def _axes(data, rank: int) -> list[int]:
  return sorted(data.draw(st.sets(st.integers(0, rank - 1), max_size=rank))) if rank else []


def _arg_permutation(data, op, src_views, T): return list(data.draw(st.permutations(range(len(src_views[0].shape)))))
def _arg_flags(data, op, src_views, T): return [data.draw(st.booleans()) for _ in src_views[0].shape]
def _arg_axes(data, op, src_views, T): return _axes(data, len(src_views[0].shape))


def _arg_reduce(data, op, src_views, T):
  ops = _schema_enum(T, T.ops[op].arg_schema, "op")
  if src_views[0].dtype == "bool": ops = [o for o in ops if o == "MAX"] or ops   # ADD/MUL take numbers (check dtype.allowed)
  return {"op": data.draw(st.sampled_from(ops)), "axes": _axes(data, len(src_views[0].shape))}


ARG_FORMS = {"permutation": _arg_permutation, "flags": _arg_flags, "axes": _arg_axes, "reduce": _arg_reduce}


def _resolve(T, schema):
  while isinstance(schema, dict) and "$ref" in schema:
    schema = T.defs[schema["$ref"].split("/")[-1]]
  return schema


def _schema_enum(T, schema, prop) -> list:
  s = _resolve(T, schema)
  return list(_resolve(T, s.get("properties", {}).get(prop, {})).get("enum", []))


def from_schema(data, T, schema, depth: int = 0):
  """A value that matches a JSON Schema (the subset the arg schemas use)."""
  s = _resolve(T, schema)
  if not isinstance(s, dict) or depth > 4: return None
  for key in ("oneOf", "anyOf"):
    if key in s: return from_schema(data, T, data.draw(st.sampled_from(s[key])), depth + 1)
  if "enum" in s: return data.draw(st.sampled_from(s["enum"]))
  t = s.get("type")
  if t == "null": return None
  if t == "boolean": return data.draw(st.booleans())
  if t == "integer":
    lo = s.get("minimum", 0)
    return data.draw(st.integers(lo, lo + 3))
  if t == "number": return data.draw(st.integers(0, 3))
  if t == "string":
    if "pattern" in s: return data.draw(st.from_regex(s["pattern"], fullmatch=True))
    return data.draw(st.sampled_from(["a", "CPU"]))
  if t == "array": return [from_schema(data, T, s.get("items", {}), depth + 1) for _ in range(data.draw(st.integers(0, 3)))]
  if t == "object":
    props = s.get("properties", {})
    out = {}
    for k in props:
      if k in s.get("required", []) or data.draw(st.booleans()): out[k] = from_schema(data, T, props[k], depth + 1)
    return out
  return None


def _arg(data, op: str, src_views, T):
  h = hints().get("ops", {}).get(op, {})
  if "args" in h: return data.draw(st.sampled_from(h["args"]))
  if "arg" in h: return ARG_FORMS[h["arg"]](data, op, src_views, T)
  return from_schema(data, T, T.ops[op].arg_schema)


def _in_domain(b: _Builder, op: str, srcs: list, fresh: set):
  """Move fresh leaf inputs of op into its tolerance domain where an element is outside
  (setting it to one), so that most elements test the op's bound."""
  from tinyspec.tolerance import tolerance, in_domain
  o = b.T.ops[op]
  t = b.T.tolerances.get(op, {})
  if "domain" not in t or not srcs: return
  dt = b.views[srcs[0]].dtype
  if DTYPES[dt].cls != "float" or tolerance(op, dt)[1] is None: return
  vals = [b.known.get(j) for j in srcs]
  if any(v is None for v in vals): return
  try: mask = in_domain(op, dt, vals) if o.category in PER_ELEMENT else None
  except (ValueError, KeyError): return
  if mask is None or mask.all(): return
  for j in srcs:
    if j not in fresh or b.known[j].shape != mask.shape: continue
    name = next((k for k, v in b.inputs.items() if v is b.known[j]), None)
    if name is None: continue
    arr = b.known[j].copy()
    arr[~mask] = V.as_array([1], b.views[j].dtype)[0]
    b.inputs[name] = b.known[j] = arr


def _draw_node(data, b: _Builder, op: str, first_dtypes=None) -> int | None:
  """A node of op, or None where the validator refuses what was drawn. first_dtypes: the
  dtypes (in order) its first value source may have."""
  T = b.T
  o = T.ops[op]
  per_element = o.category in PER_ELEMENT
  srcs, chosen, want, fresh = [], {}, None, set()
  shape_slots = [k for k, s in enumerate(o.slots) if s.kind == "shape"]
  form = hints().get("ops", {}).get(op, {}).get("shapes")
  shape_vals = None
  for k, slot in enumerate(o.slots):
    if slot.kind not in ("value", "shape"): break   # an optional or empty variadic slot of another kind stays empty
    if slot.optional and not data.draw(st.booleans()): break
    count = data.draw(st.integers(max(slot.min_count, 1), 3)) if slot.variadic else 1
    for _ in range(count):
      if slot.kind == "value":
        allowed = _allowed(slot, chosen, b.dtypes)
        if first_dtypes is not None and not srcs and allowed: allowed = [x for x in first_dtypes if x in allowed]
        if not allowed: return None
        before = len(b.nodes)
        j = _value_source(data, b, allowed, want, per_element, srcs)
        if j >= before: fresh.add(j)
        chosen.setdefault(slot.name, b.views[j].dtype)
        if per_element: want = b.views[j].shape if want is None else (_bcast(want, b.views[j].shape) or want)
        elif want is None: want = b.views[j].shape
      else:   # a shape operand
        if shape_vals is None:
          src0 = b.views[srcs[0]].shape if srcs else ()
          shape_vals = SHAPE_FORMS[form](data, src0) if form else [data.draw(shapes()) for _ in shape_slots]
        j = b.shape_node(shape_vals[shape_slots.index(k)])
      srcs.append(j)
  arg = _arg(data, op, [b.views[j] for j in srcs], T)
  _in_domain(b, op, srcs, fresh)
  i = b.add(op, srcs, arg)
  if i is None: return None
  v = b.views[i]
  if not isinstance(v.dtype, str) or v.dtype == "void" or (b.level == "kernel" and v.shape != ()):
    b.nodes.pop(); b.views.pop()   # a side effect, a tuple, or a vector in a kernel: not an output value
    return None
  return i


@st.composite
def _graphs(draw_, level: str, T, ops, max_ops: int, final_op: str | None, dtypes, final_dtypes=None, salt: int = 0):
  data = _DrawAdapter(draw_)
  T = _tables(T)
  b = _Builder(T, level, dtypes, salt)
  if level == "kernel":
    b.n = 1 + (data.draw(st.integers(0, 2 * KERNEL_LENGTH - 1)) + KERNEL_LENGTH - 1) % (2 * KERNEL_LENGTH)
    bound = b.add("CONST", [], {"value": b.n, "dtype": "index"})
    b.range = b.add("RANGE", [bound], {"id": 0, "type": "LOOP"})
    b.helpers.update({bound, b.range})
  names = drawable_ops(level, T, ops)
  # the zero choice draws ZERO_STEPS ops, each from the op list rotated by the salt and
  # the step: Hypothesis's first example of each fuzz round holds other ops
  steps = 1 + (data.draw(st.integers(0, max_ops - 1)) + min(ZERO_STEPS, max_ops) - 1) % max_ops
  made = []
  for step in range(steps):
    last = final_op is not None and step == steps - 1
    i = None
    if last:   # the final op; where it cannot be drawn here (a STORE has no value), an ordinary step
      for _attempt in range(4):
        i = _draw_node(data, b, final_op, final_dtypes)
        if i is not None: break
      if i is None and not names: data.reject()
    for attempt in range(4 if i is None else 0):
      i = _draw_node(data, b, data.draw(st.sampled_from(_rotated(names, salt + 5 * step + attempt))))
      if i is not None: break
    if i is not None: made.append(i)
  if not made: data.reject()
  return _finish(b, made)


def _rotated(xs: list, k: int) -> list:
  k %= max(len(xs), 1)
  return xs[k:] + xs[:k]


class _DrawAdapter:
  """`data.draw(strategy)` over a composite's draw function."""
  def __init__(self, draw): self.draw = draw
  def reject(self):
    from hypothesis import assume
    assume(False)


def _finish(b: _Builder, made: list) -> Drawn:
  """The drawn graph without what refused attempts left behind."""
  outs = [i for i in made if i not in b.leaves]
  if b.level != "kernel":
    g = Graph(list(b.nodes), outs, "tensor")
    d = Drawn(g, dict(b.inputs), "tensor", {f"out{k}": i for k, i in enumerate(outs)}, dict(b.known), b.T)
  else: d = _kernel_graph(b, outs)
  return d.outputs_only(outs)


def _kernel_graph(b: _Builder, outs: list) -> Drawn:
  """Store each output node into its own PARAM: SINK(END(GROUP(STORE...), RANGE))."""
  nodes, names = _store_outputs(list(b.nodes), [b.views[i].dtype for i in outs], outs, b.n, b.range, b.slots["param"])
  g = Graph(nodes, None, "kernel")
  return Drawn(g, dict(b.inputs), "kernel", names, dict(b.known), b.T)


def _store_outputs(nodes: list, dtypes: list, outs: list, n: int, rng: int, first_slot: int):
  """Append to a kernel's nodes a PARAM per output node, a STORE of the node into it, and
  SINK(END(GROUP(stores), RANGE)). Returns the nodes and {input name: output node}."""
  shape = len(nodes); nodes.append(Node("VCONST", [], {"values": [n], "dtype": "index"}))
  stores, names = [], {}
  for k, (i, dt) in enumerate(zip(outs, dtypes)):
    slot = first_slot + k
    nodes.append(Node("PARAM", [shape], {"slot": slot, "dtype": dt}))
    nodes.append(Node("INDEX", [len(nodes) - 1, rng]))
    nodes.append(Node("STORE", [len(nodes) - 1, i]))
    stores.append(len(nodes) - 1)
    names[f"param{slot}"] = i
  if len(stores) != 1: nodes.append(Node("GROUP", stores))
  nodes.append(Node("END", [len(nodes) - 1, rng]))
  nodes.append(Node("SINK", [len(nodes) - 1]))
  return nodes, names


def _rebuild_kernel(d: Drawn, keep: set, out_nodes: list) -> Drawn:
  """The kernel of the kept nodes (the outputs, their loads, the loop), storing out_nodes."""
  from tinyspec.validate import validate
  g = d.graph
  views = validate(g, tables=d.tables).views
  r = next(i for i, n in enumerate(g.nodes) if n.op == "RANGE")   # the loop stays, read or not
  order = sorted(set(keep) | {r, *g.nodes[r].src})
  new = {old: k for k, old in enumerate(order)}
  nodes = [Node(g.nodes[i].op, [new[j] for j in g.nodes[i].src], thaw(g.nodes[i].arg)) for i in order]
  rng = next(new[i] for i in order if g.nodes[i].op == "RANGE")
  params = [g.nodes[i].arg["slot"] for i in order if g.nodes[i].op == "PARAM"]
  n = int(thaw(g.nodes[g.nodes[next(i for i in order if g.nodes[i].op == "RANGE")].src[0]].arg)["value"])
  nodes, names = _store_outputs(nodes, [views[i].dtype for i in out_nodes], [new[i] for i in out_nodes], n, rng, max(params + [-1]) + 1)
  used = {f"param{p}" for p in params}
  return Drawn(Graph(nodes, None, "kernel"), {k: v for k, v in d.inputs.items() if k in used}, "kernel", names,
               {new[i]: v for i, v in d.values.items() if i in new}, d.tables)


def graphs(level: str = "tensor", *, ops=None, max_ops: int = 6, tables=None, final_op: str | None = None, dtypes=None,
           final_dtypes=None, salt: int = 0):
  """Valid graphs at `level` ("tensor" or "kernel"), as Drawn. ops: restrict the ops
  drawn; dtypes: restrict the dtypes of values; final_op: the last step draws this op (a
  node nothing else reads), its first value source of one of final_dtypes (in that
  order: the first is the zero choice); salt: mixed into the seeds of the inputs' fills."""
  if level not in ("tensor", "kernel"): raise ValueError(f"level must be tensor or kernel, not {level!r}")
  if not drawable_ops(level, tables, ops) and final_op is None: raise ValueError(f"no drawable op at {level} level among {ops}")
  return _graphs(level, tables, None if ops is None else tuple(ops), max_ops, final_op, None if dtypes is None else tuple(dtypes),
                 None if final_dtypes is None else tuple(final_dtypes), salt)


# ------------------------------------------------------------------ mutations
@dataclass
class Mutant:
  graph: Graph
  rule: str
  node: int | None
  how: str
  source: Drawn | None = None

  def __repr__(self): return f"Mutant({self.how} breaking {self.rule} at node {self.node} of {len(self.graph.nodes)})"


def _consumers(g: Graph) -> set:
  return {j for n in g.nodes for j in n.src}


def _copy(g: Graph, level: str | None = None) -> Graph:
  return Graph([Node(n.op, list(n.src), thaw(n.arg), n.dtype, n.shape) for n in g.nodes], list(g.root_indices), level or g.level)


def _rule_ops(T, rule: str) -> list[str]:
  """Ops whose checks raise `rule`."""
  return [n for n, o in T.ops.items() if any(c.rule == rule for c in o.checks)]


def _apply(data, d: Drawn, rule: str, m: dict, T) -> Mutant | None:
  """Break d's graph by mutation m (tagged `rule`), or None where m does not apply."""
  from tinyspec.validate import validate
  g = _copy(d.graph, d.level)
  res = validate(d.graph, tables=T)
  views = res.views
  read = _consumers(g)
  cands = [i for i in range(len(g.nodes)) if i not in read and (m.get("op") is None or g.nodes[i].op == m["op"])]
  how = m["how"]
  if how in ("level", "bad_const"): cands = [None]
  if not cands: return None
  i = data.draw(st.sampled_from(cands))
  n = g.nodes[i] if i is not None else None
  def add(node):
    g.nodes.append(node); return len(g.nodes) - 1
  if how == "rename_op": n.op = "NOT_AN_OP"
  elif how == "src_self": 
    if not n.src: n.src = (i,)
    else: n.src = (i,) + tuple(n.src[1:])
  elif how == "extra_src":
    # one more than it has is an arity error only for a node that fills every slot (LOAD(buf) + 1 is a gate)
    if T.ops[n.op].max_src == float("inf") or len(n.src) < T.ops[n.op].max_src or (not n.src and i == 0): return None
    n.src = tuple(n.src) + ((n.src[0],) if n.src else (i - 1,))
  elif how == "bad_arg":
    if not list(T.ops[n.op].arg_validator.iter_errors("not-an-arg")): return None
    n.arg = "not-an-arg"
  elif how == "declare_dtype":
    dt = views[i].dtype
    if not isinstance(dt, str): return None
    n.dtype = data.draw(st.sampled_from([x for x in value_dtypes() if x != dt]))
  elif how == "declare_shape":
    sh = views[i].shape
    if not isinstance(sh, tuple) or any(isinstance(x, tuple) for x in sh): return None
    n.shape = tuple(sh) + (2,)
  elif how in ("dtype_disallowed", "dtype_mismatch"):
    i = _retype_sources(data, g, i, views, T, how, add)
    if i is None: return None
  elif how == "shape_mismatch":
    if T.ops[n.op].category not in PER_ELEMENT or len(n.src) < 2 or d.level != "tensor": return None
    sh = views[n.src[0]].shape
    if not sh or sh[-1] in (0, 1): return None
    s = add(Node("VCONST", [], {"values": [sh[-1] + 1], "dtype": "index"}))
    leaf = add(Node("BUFFER", [s], {"slot": 900, "dtype": views[n.src[1]].dtype, "device": "CPU"}))
    n.src = (n.src[0], leaf) + tuple(n.src[2:])
    i = _move_last(g, i)
  elif how == "level":
    return _level_mutant(data, d, g, [x for x, o in T.ops.items() if d.level not in o.levels and o.example and not o.untrusted
                                      and o.example[-1]["op"] == x], T)   # the op is its example's root (not inside a LINEAR)
  elif how == "bad_const":
    dt = data.draw(st.sampled_from([x for x in value_dtypes() if DTYPES[x].cls in ("int", "uint")]))
    i = add(Node("CONST", [], {"value": int(DTYPES[dt].max) + 1, "dtype": dt}))
    g.roots = list(g.root_indices) + [i]
  elif how == "arg_append":
    a = thaw(n.arg)
    lst = a.get(m["key"]) if m.get("key") else a
    if not isinstance(lst, list): return None
    rank = len(views[n.src[0]].shape)
    lst.append(rank if m.get("value") == "rank" else (lst[0] if lst else m.get("empty", 0)))
    n.arg = a
  elif how == "shape_append":
    o = T.ops[n.op]
    k = next(k for k, s in enumerate(o.slots) if s.name == m["slot"])
    if m.get("needs") == "nonempty" and (0 in views[n.src[0]].shape): return None
    j = n.src[k]
    vals = list(thaw(g.nodes[j].arg)["values"]) + [2]
    s = add(Node("VCONST", [], {"values": vals, "dtype": "index"}))
    n.src = tuple(s if q == k else x for q, x in enumerate(n.src))
    i = _move_last(g, i)
  else:
    raise ValueError(f"strategies.yaml: unknown mutation {how!r}")
  return Mutant(g, rule, i, how, d)


def _move_last(g: Graph, i: int) -> int:
  """Move node i (which nothing reads) after the nodes appended for it; renumber."""
  g.nodes.append(g.nodes.pop(i))
  last = len(g.nodes) - 1
  def f(j): return last if j == i else (j - 1 if j > i else j)
  for n in g.nodes: n.src = tuple(f(j) for j in n.src)
  g.roots = [f(r) for r in g.root_indices]
  return last


def _retype_sources(data, g: Graph, i: int, views, T, how: str, add) -> int | None:
  """dtype_disallowed: every source of one `same` group becomes a CONST of a dtype the
  group's slot does not allow. dtype_mismatch: one `same` slot's source becomes a CONST
  of another dtype its target slot allows."""
  n = g.nodes[i]
  o = T.ops[n.op]
  names = [s.name for s in o.slots]
  slots = [o.slot_for(k) for k in range(len(n.src))]
  if how == "dtype_disallowed":
    filled = [s for k, s in enumerate(slots) if all(s is not t for t in slots[:k])]   # the slots the node fills, once each
    groups = [s for s in filled if s.kind == "value" and not isinstance(s.dtype, dict) and s.allowed() is not None]
    groups = [s for s in groups if set(value_dtypes()) - s.allowed()]
    if not groups: return None
    s0 = data.draw(st.sampled_from(groups))
    dt = data.draw(st.sampled_from(sorted(set(value_dtypes()) - s0.allowed())))
    members = [k for k, s in enumerate(slots) if s is s0 or (isinstance(s.dtype, dict) and s.dtype.get("same") == s0.name)]
  else:
    sames = [k for k, s in enumerate(slots) if isinstance(s.dtype, dict) and s.dtype.get("same") in names]
    if not sames: return None
    k = data.draw(st.sampled_from(sames))
    target = o.slots[names.index(slots[k].dtype["same"])]
    have = views[n.src[names.index(target.name)]].dtype
    allowed = target.allowed() or set(value_dtypes())
    others = sorted(allowed - {have}, key=value_dtypes().index)
    if not others: return None
    dt = data.draw(st.sampled_from(others))
    members = [k]
  src = list(n.src)
  for k in members:
    src[k] = add(Node("CONST", [], {"value": V.const_json(1, dt), "dtype": dt}))
  n.src = tuple(src)
  return _move_last(g, i)


def _level_mutant(data, d: Drawn, g: Graph, bad: list, T) -> Mutant | None:
  """A root of an op the level does not allow: the example of such an op, appended."""
  from tinyspec.graph import from_document
  if not bad: return None
  op = data.draw(st.sampled_from(sorted(bad)))
  ex, _ = from_document(T.ops[op].example)
  if ex is None: return None
  base = len(g.nodes)
  for n in ex.nodes: g.nodes.append(Node(n.op, [j + base for j in n.src], thaw(n.arg)))
  node = base + len(ex.nodes) - 1
  g.roots = list(g.root_indices) + [node]
  g.level = d.level
  return Mutant(g, "level.op", node, "level", d)


def _applicable_ops(how: str, T, level: str) -> list[str] | None:
  """The drawable ops a mutation can break (None: any op will do), from their slots."""
  ops = drawable_ops(level, T)
  def value_slots(o): return [s for s in o.slots if s.kind == "value"]
  if how == "dtype_mismatch": return [n for n in ops if any(isinstance(s.dtype, dict) for s in T.ops[n].slots)]
  if how == "dtype_disallowed":
    every = set(value_dtypes())
    return [n for n in ops if any(not isinstance(s.dtype, dict) and s.allowed() is not None and every - s.allowed() for s in value_slots(T.ops[n]))]
  if how == "shape_mismatch": return [n for n in ops if T.ops[n].category in PER_ELEMENT and len(value_slots(T.ops[n])) >= 2]
  if how == "extra_src": return [n for n in ops if T.ops[n].max_src != float("inf")]
  return None


def mutation_rules(T=None) -> dict:
  """rule id -> mutation (strategies.yaml `mutations`), for the rules of the tables."""
  T = _tables(T)
  ids = T.rule_ids()
  return {r: m for r, m in hints().get("mutations", {}).items() if r in ids}


@st.composite
def _invalid(draw_, level: str, T, rules, max_ops: int):
  data = _DrawAdapter(draw_)
  T = _tables(T)
  table = mutation_rules(T)
  rule = data.draw(st.sampled_from(sorted(rules or table)))
  m = table[rule]
  final = m.get("op")
  if final is None:   # the last node (the one nothing reads) gets an op the mutation applies to
    ops = _applicable_ops(m["how"], T, level)
    final = data.draw(st.sampled_from(ops)) if ops else None
  if final is not None and final not in drawable_ops(level, T): data.reject()
  d = data.draw(graphs(level, max_ops=max_ops, tables=T, final_op=final))
  mut = _apply(data, d, rule, m, T)
  if mut is None: data.reject()
  return mut


def invalid_graphs(level: str = "tensor", *, rules=None, max_ops: int = 4, tables=None):
  """Graphs that break exactly one tagged rule (Mutant: .graph, .rule, .node)."""
  return _invalid(level, tables, None if rules is None else tuple(rules), max_ops)
