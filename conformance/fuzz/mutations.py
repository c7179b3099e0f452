"""Invalid graphs for the validator's rules: a valid drawn graph (graphs.py) broken by one
mutation of the `mutations` table of strategies.yaml, tagged with the rule id it must
break. A mutation touches only a node nothing else reads (or adds a root), so no other
node's rules change.

    @given(invalid_graphs("tensor"))    # Mutant: .graph breaks .rule at .node

Each mutation (`how` in strategies.yaml, whose header says what each does) is a handler
of MUTATION; TARGET says which ops a mutation can break where not every op will do.
"""
from __future__ import annotations
from dataclasses import dataclass
from hypothesis import strategies as st
from tinyspec.dispatch import Registry
from tinyspec.dtypes import DTYPES
from tinyspec.frozen import thaw
from tinyspec.graph import Graph, Node, from_document
from tinyspec.validate import validate
from tinyspec.conformance.corpus import values as V
from tinyspec.conformance.fuzz.drawforms import hints
from tinyspec.conformance.fuzz.graphs import DrawAdapter, Drawn, drawable_ops, graphs, tables_or_shipped, value_dtypes

MUTATION = Registry("mutation", ops=False)      # how -> handler(site) -> the node that breaks the rule, or None: not here
TARGET = Registry("mutation target", ops=False)  # how -> predicate(op, tables) on the ops it can break (absent: any op)


@dataclass
class Mutant:
  graph: Graph
  rule: str
  node: int | None
  how: str
  source: Drawn | None = None

  def __repr__(self): return f"Mutant({self.how} breaking {self.rule} at node {self.node} of {len(self.graph.nodes)})"


@dataclass
class _Site:
  """Where a mutation works: a copy of the drawn graph, the node drawn to break (None for a
  mutation that adds a root), the drawn graph's views, the tables and the table entry."""
  data: DrawAdapter
  drawn: Drawn
  g: Graph
  i: int | None
  views: list
  T: object
  m: dict

  @property
  def n(self) -> Node: return self.g.nodes[self.i]

  def add(self, node: Node) -> int:
    self.g.nodes.append(node)
    return len(self.g.nodes) - 1


def _adds_root(handler):
  """Mark a mutation that adds a root rather than changing a node nothing reads."""
  handler.adds_root = True
  return handler


def mutate(data, d: Drawn, rule: str, m: dict, T) -> Mutant | None:
  """Break d's graph by mutation m (tagged `rule`), or None where m does not apply."""
  handler = MUTATION.get(m["how"])
  if handler is None: raise ValueError(f"strategies.yaml: unknown mutation {m['how']!r}")
  g = Graph([Node(n.op, list(n.src), thaw(n.arg), n.dtype, n.shape) for n in d.graph.nodes], list(d.graph.root_indices), d.level)
  views = validate(d.graph, tables=T).views
  read = {j for n in g.nodes for j in n.src}
  cands = [None] if getattr(handler, "adds_root", False) else \
          [i for i in range(len(g.nodes)) if i not in read and (m.get("op") is None or g.nodes[i].op == m["op"])]
  if not cands: return None
  node = handler(_Site(data, d, g, data.draw(st.sampled_from(cands)), views, T, m))
  return None if node is None else Mutant(g, rule, node, m["how"], d)


@MUTATION.register("rename_op")
def _rename_op(t: _Site):
  t.n.op = "NOT_AN_OP"
  return t.i


@MUTATION.register("src_self")
def _src_self(t: _Site):
  t.n.src = (t.i,) + tuple(t.n.src[1:])
  return t.i


@MUTATION.register("extra_src")
def _extra_src(t: _Site):
  n, o = t.n, t.T.ops[t.n.op]
  # one more than it has is an arity error only for a node that fills every slot (LOAD(buf) + 1 is a gate)
  if o.max_src == float("inf") or len(n.src) < o.max_src or (not n.src and t.i == 0): return None
  n.src = tuple(n.src) + ((n.src[0],) if n.src else (t.i - 1,))
  return t.i


@MUTATION.register("bad_arg")
def _bad_arg(t: _Site):
  if not list(t.T.ops[t.n.op].arg_validator.iter_errors("not-an-arg")): return None
  t.n.arg = "not-an-arg"
  return t.i


@MUTATION.register("declare_dtype")
def _declare_dtype(t: _Site):
  dt = t.views[t.i].dtype
  if not isinstance(dt, str): return None
  t.n.dtype = t.data.draw(st.sampled_from([x for x in value_dtypes() if x != dt]))
  return t.i


@MUTATION.register("declare_shape")
def _declare_shape(t: _Site):
  sh = t.views[t.i].shape
  if not isinstance(sh, tuple) or any(isinstance(x, tuple) for x in sh): return None
  t.n.shape = tuple(sh) + (2,)
  return t.i


@MUTATION.register("dtype_disallowed")
def _dtype_disallowed(t: _Site):
  """Every source of one `same` group becomes a CONST of a dtype the group's slot does not allow."""
  o = t.T.ops[t.n.op]
  slots = [o.slot_for(k) for k in range(len(t.n.src))]
  filled = [s for k, s in enumerate(slots) if all(s is not x for x in slots[:k])]   # the slots the node fills, once each
  groups = [s for s in filled if s.kind == "value" and not isinstance(s.dtype, dict) and s.allowed() is not None]
  groups = [s for s in groups if set(value_dtypes()) - s.allowed()]
  if not groups: return None
  s0 = t.data.draw(st.sampled_from(groups))
  dt = t.data.draw(st.sampled_from(sorted(set(value_dtypes()) - s0.allowed())))
  return _retype(t, [k for k, s in enumerate(slots) if s is s0 or (isinstance(s.dtype, dict) and s.dtype.get("same") == s0.name)], dt)


@MUTATION.register("dtype_mismatch")
def _dtype_mismatch(t: _Site):
  """One `same` slot's source becomes a CONST of another dtype its target slot allows."""
  o = t.T.ops[t.n.op]
  names = [s.name for s in o.slots]
  slots = [o.slot_for(k) for k in range(len(t.n.src))]
  sames = [k for k, s in enumerate(slots) if isinstance(s.dtype, dict) and s.dtype.get("same") in names]
  if not sames: return None
  k = t.data.draw(st.sampled_from(sames))
  target = o.slots[names.index(slots[k].dtype["same"])]
  have = t.views[t.n.src[names.index(target.name)]].dtype
  others = sorted((target.allowed() or set(value_dtypes())) - {have}, key=value_dtypes().index)
  if not others: return None
  return _retype(t, [k], t.data.draw(st.sampled_from(others)))


def _retype(t: _Site, members: list, dt: str) -> int:
  """The node's sources at positions `members` replaced by CONSTs of dt."""
  src = list(t.n.src)
  for k in members: src[k] = t.add(Node("CONST", [], {"value": V.const_json(1, dt), "dtype": dt}))
  t.n.src = tuple(src)
  return _move_last(t.g, t.i)


@MUTATION.register("shape_mismatch")
def _shape_mismatch(t: _Site):
  n = t.n
  if n.op not in t.T.alu_ops or len(n.src) < 2 or t.drawn.level != "tensor": return None
  sh = t.views[n.src[0]].shape
  if not sh or sh[-1] in (0, 1): return None
  s = t.add(Node("VCONST", [], {"values": [sh[-1] + 1], "dtype": "index"}))
  leaf = t.add(Node("BUFFER", [s], {"slot": 900, "dtype": t.views[n.src[1]].dtype, "device": "CPU"}))
  n.src = (n.src[0], leaf) + tuple(n.src[2:])
  return _move_last(t.g, t.i)


@MUTATION.register("level")
@_adds_root
def _level(t: _Site):
  """A root of an op the level does not allow: the example of such an op, appended (an op
  that is its example's root, not inside a LINEAR)."""
  bad = [x for x, o in t.T.ops.items() if t.drawn.level not in o.levels and o.example and not o.untrusted and o.example[-1]["op"] == x]
  if not bad: return None
  ex, _ = from_document(t.T.ops[t.data.draw(st.sampled_from(sorted(bad)))].example)
  if ex is None: return None
  base = len(t.g.nodes)
  for n in ex.nodes: t.g.nodes.append(Node(n.op, [j + base for j in n.src], thaw(n.arg)))
  node = base + len(ex.nodes) - 1
  t.g.roots = list(t.g.root_indices) + [node]
  return node


@MUTATION.register("bad_const")
@_adds_root
def _bad_const(t: _Site):
  dt = t.data.draw(st.sampled_from([x for x in value_dtypes() if DTYPES[x].cls in ("int", "uint")]))
  i = t.add(Node("CONST", [], {"value": int(DTYPES[dt].max) + 1, "dtype": dt}))
  t.g.roots = list(t.g.root_indices) + [i]
  return i


@MUTATION.register("arg_append")
def _arg_append(t: _Site):
  a = thaw(t.n.arg)
  lst = a.get(t.m["key"]) if t.m.get("key") else a
  if not isinstance(lst, list): return None
  rank = len(t.views[t.n.src[0]].shape)
  lst.append(rank if t.m.get("value") == "rank" else (lst[0] if lst else t.m.get("empty", 0)))
  t.n.arg = a
  return t.i


@MUTATION.register("shape_append")
def _shape_append(t: _Site):
  n = t.n
  k = next(k for k, s in enumerate(t.T.ops[n.op].slots) if s.name == t.m["slot"])
  if t.m.get("needs") == "nonempty" and (0 in t.views[n.src[0]].shape): return None
  vals = list(thaw(t.g.nodes[n.src[k]].arg)["values"]) + [2]
  s = t.add(Node("VCONST", [], {"values": vals, "dtype": "index"}))
  n.src = tuple(s if q == k else x for q, x in enumerate(n.src))
  return _move_last(t.g, t.i)


def _move_last(g: Graph, i: int) -> int:
  """Move node i (which nothing reads) after the nodes appended for it; renumber."""
  g.nodes.append(g.nodes.pop(i))
  last = len(g.nodes) - 1
  def f(j): return last if j == i else (j - 1 if j > i else j)
  for n in g.nodes: n.src = tuple(f(j) for j in n.src)
  g.roots = [f(r) for r in g.root_indices]
  return last


def _value_slots(o) -> list: return [s for s in o.slots if s.kind == "value"]


@TARGET.register("dtype_mismatch")
def _has_same_slot(o, T) -> bool: return any(isinstance(s.dtype, dict) for s in o.slots)


@TARGET.register("dtype_disallowed")
def _refuses_a_dtype(o, T) -> bool:
  every = set(value_dtypes())
  return any(not isinstance(s.dtype, dict) and s.allowed() is not None and every - s.allowed() for s in _value_slots(o))


@TARGET.register("shape_mismatch")
def _broadcasts_two(o, T) -> bool: return o.name in T.alu_ops and len(_value_slots(o)) >= 2


@TARGET.register("extra_src")
def _has_max_arity(o, T) -> bool: return o.max_src != float("inf")


def _applicable_ops(how: str, T, level: str) -> list[str] | None:
  """The drawable ops a mutation can break (None: any op will do), from their slots."""
  can_break = TARGET.get(how)
  return None if can_break is None else [n for n in drawable_ops(level, T) if can_break(T.ops[n], T)]


def mutation_rules(T=None) -> dict:
  """rule id -> mutation (strategies.yaml `mutations`), for the rules of the tables."""
  ids = tables_or_shipped(T).rule_ids()
  return {r: m for r, m in hints().get("mutations", {}).items() if r in ids}


@st.composite
def _invalid(draw_, level: str, T, rules, max_ops: int):
  data = DrawAdapter(draw_)
  T = tables_or_shipped(T)
  table = mutation_rules(T)
  rule = data.draw(st.sampled_from(sorted(rules or table)))
  m = table[rule]
  final = m.get("op")
  if final is None:   # the last node (the one nothing reads) gets an op the mutation applies to
    ops = _applicable_ops(m["how"], T, level)
    final = data.draw(st.sampled_from(ops)) if ops else None
  if final is not None and final not in drawable_ops(level, T): data.reject()
  d = data.draw(graphs(level, max_ops=max_ops, tables=T, final_op=final))
  mut = mutate(data, d, rule, m, T)
  if mut is None: data.reject()
  return mut


def invalid_graphs(level: str = "tensor", *, rules=None, max_ops: int = 4, tables=None):
  """Graphs that break exactly one tagged rule (Mutant: .graph, .rule, .node)."""
  return _invalid(level, tables, None if rules is None else tuple(rules), max_ops)


def with_mutants(base, offset: int = 0):
  """Pairs (drawn graph, a mutant of it or None): what the fuzz draws. offset rotates the
  rule list (the zero choice takes its first: each round breaks another rule)."""
  @st.composite
  def pairs(draw):
    d = draw(base)
    table = mutation_rules(d.tables)
    rules = sorted(table)
    rule = draw(st.sampled_from(rules[offset % len(rules):] + rules[:offset % len(rules)]))
    return d, mutate(DrawAdapter(draw), d, rule, table[rule], tables_or_shipped(d.tables))
  return pairs()
