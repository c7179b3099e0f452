"""Hypothesis strategies for tinyspec graphs, drawn from the tables.

    from tinyspec.conformance.strategies import graphs, invalid_graphs   # (the public names)
    @given(graphs("tensor"))            # valid by construction; .graph, .inputs, .outputs
    @given(invalid_graphs("tensor"))    # .graph breaks .rule at .node

`graphs(level)` builds a graph node by node. Each step picks an op the tables allow at
the level (spec/ops.yaml `levels`, not untrusted, required sources of kind value or shape
only, minus the `skip` list of strategies.yaml), fills its slots in order (a
`same` slot takes the dtype of the slot it names; a value slot takes a node already drawn
or a fresh leaf of a dtype its group allows, broadcastable with the op's other sources
when the op applies per element; optional slots sometimes; variadic ones 1 to 3 times),
draws its shape operands and arg (the named draw forms of strategies.yaml where an op's
checks constrain them: permutations, reshapes, pads...; else from the arg's JSON Schema:
drawforms.py)
and keeps the node only if the validator's node check (tinyspec.validate.check_node)
accepts it. Leaves are BUFFERs (tensor level) or INDEX(PARAM, RANGE) loads (kernel
level: one loop over n elements) and CONSTs, their values mixed from the dtype's edge
values and random ones; a fresh leaf of an op with a `domain` in ops.yaml `tolerances`
is moved into the domain where it can be. Every op node is an output (a root at tensor
level, a STORE into its own PARAM at kernel level), so a backend's value of every node
can be checked on its own (conformance/fuzz/checks.py). Hypothesis shrinks toward fewer
steps, earlier ops and simpler values; `Drawn.minimal(node)` keeps only a node and what
it reads (the dead nodes go).

`invalid_graphs(level)` (mutations.py) draws a valid graph and breaks it with one
mutation of the `mutations` table of strategies.yaml, tagged with the rule id it must break.

Passing `tables=` (a tinyspec.tables.Tables) draws from other tables: an op added to
ops.yaml is drawn without a change here.
"""
from __future__ import annotations
from dataclasses import dataclass, field
import numpy as np
from hypothesis import assume, strategies as st
from tinyspec.dispatch import input_name
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph, Node
from tinyspec.frozen import thaw
from tinyspec.tables import tables as shipped_tables
from tinyspec.validate import check_node, validate
from tinyspec.conformance.corpus import values as V
from tinyspec.conformance.fuzz.drawforms import hints, draw_arg, draw_shapes
from tinyspec.tolerance import tolerance, in_domain


def tables_or_shipped(T):
  """T, or the shipped tables where it is None."""
  return T if T is not None else shipped_tables()


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
    inputs_of = tables_or_shipped(self.tables).input_ops
    used = {input_name(n.op, n.arg) for n in (self.graph.nodes[i] for i in order) if n.op in inputs_of}
    return Drawn(Graph(nodes, roots if roots != [len(nodes) - 1] else None, self.level),
                 {k: v for k, v in self.inputs.items() if k in used}, self.level,
                 {f"out{k}": new[i] for k, i in enumerate(out_nodes)}, {new[i]: v for i, v in self.values.items() if i in new}, self.tables)


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
    self.slots: dict = {}       # input op -> its next free slot
    self.n = 1                  # kernel level: the loop's length
    self.salt = salt            # mixed into every fill's random seed (fuzz rounds differ at the zero choice)
    self.range = None

  def add(self, op: str, src: list, arg=None, level: str | None = None):
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
    i = self.input("BUFFER", shape, arr, {"dtype": dt, "device": "CPU"})
    self.known[i] = arr
    self.leaves.add(i)
    return i

  def _load(self, data, dt: str) -> int:
    arr = data.draw(arrays(dt, (self.n,), self.salt * 1000 + len(self.nodes)))
    p = self.input("PARAM", (self.n,), arr, {"dtype": dt})
    i = self.add("INDEX", [p, self.range])
    self.helpers.add(p)
    self.known[i] = arr
    self.leaves.add(i)
    return i

  def input(self, op: str, shape: tuple, arr, arg: dict) -> int:
    """A new input node of op (BUFFER, PARAM) at its next free slot, holding arr."""
    slot = self.slots.get(op, 0)
    self.slots[op] = slot + 1
    arg = {"slot": slot, **arg}
    i = self.add(op, [self.shape_node(shape)], arg)
    self.inputs[input_name(op, arg)] = arr
    return i

  def value_nodes(self) -> list[int]:
    return [i for i, v in enumerate(self.views) if i not in self.helpers and isinstance(v.dtype, str) and v.dtype != "void"
            and (self.level != "kernel" or v.shape == ())]


def drawable_ops(level: str, T=None, ops=None) -> list[str]:
  """Ops the strategies draw at level: allowed there, trusted, not leaves, sources of
  kind value or shape only, not in strategies.yaml `skip` (ops: restrict to these)."""
  T = tables_or_shipped(T)
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


def _in_domain(b: _Builder, op: str, srcs: list, fresh: set):
  """Move fresh leaf inputs of op into its tolerance domain where an element is outside
  (setting it to one), so that most elements test the op's bound."""
  t = b.T.tolerances.get(op, {})
  if "domain" not in t or not srcs: return
  dt = b.views[srcs[0]].dtype
  if DTYPES[dt].cls != "float" or tolerance(op, dt)[1] is None: return
  vals = [b.known.get(j) for j in srcs]
  if any(v is None for v in vals): return
  try: mask = in_domain(op, dt, vals) if op in b.T.alu_ops else None
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
  per_element = op in T.alu_ops   # its value sources broadcast
  srcs, chosen, want, fresh = [], {}, None, set()
  shape_slots = [k for k, s in enumerate(o.slots) if s.kind == "shape"]
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
          shape_vals = draw_shapes(data, op, b.views[srcs[0]].shape if srcs else ())   # its strategies.yaml form, or any shapes
          if shape_vals is None: shape_vals = [data.draw(shapes()) for _ in shape_slots]
        j = b.shape_node(shape_vals[shape_slots.index(k)])
      srcs.append(j)
  arg = draw_arg(data, op, [b.views[j] for j in srcs], T)
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
  data = DrawAdapter(draw_)
  T = tables_or_shipped(T)
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


class DrawAdapter:
  """`data.draw(strategy)` over a composite's draw function."""
  def __init__(self, draw): self.draw = draw
  def reject(self): assume(False)


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
  nodes, names = _store_outputs(list(b.nodes), [b.views[i].dtype for i in outs], outs, b.n, b.range, b.slots.get("PARAM", 0))
  g = Graph(nodes, None, "kernel")
  return Drawn(g, dict(b.inputs), "kernel", names, dict(b.known), b.T)


def _store_outputs(nodes: list, dtypes: list, outs: list, n: int, rng: int, first_slot: int):
  """Append to a kernel's nodes a PARAM per output node, a STORE of the node into it, and
  SINK(END(GROUP(stores), RANGE)). Returns the nodes and {input name: output node}."""
  shape = len(nodes); nodes.append(Node("VCONST", [], {"values": [n], "dtype": "index"}))
  stores, names = [], {}
  for k, (i, dt) in enumerate(zip(outs, dtypes)):
    arg = {"slot": first_slot + k, "dtype": dt}
    nodes.append(Node("PARAM", [shape], arg))
    nodes.append(Node("INDEX", [len(nodes) - 1, rng]))
    nodes.append(Node("STORE", [len(nodes) - 1, i]))
    stores.append(len(nodes) - 1)
    names[input_name("PARAM", arg)] = i
  if len(stores) != 1: nodes.append(Node("GROUP", stores))
  nodes.append(Node("END", [len(nodes) - 1, rng]))
  nodes.append(Node("SINK", [len(nodes) - 1]))
  return nodes, names


def _rebuild_kernel(d: Drawn, keep: set, out_nodes: list) -> Drawn:
  """The kernel of the kept nodes (the outputs, their loads, the loop), storing out_nodes."""
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
  inputs_of = tables_or_shipped(d.tables).input_ops
  used = {input_name(g.nodes[i].op, g.nodes[i].arg) for i in order if g.nodes[i].op in inputs_of}
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
