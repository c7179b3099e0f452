"""What evaluate() derives from a graph alone, worked out once and kept across calls.

Validating a graph, checking its ops and planning its scopes (refimpl/plan.py) depend on
the graph and never on the inputs' values, yet cost more Python time than the NumPy work of
a small kernel. `prepare(g, level)` returns them from a bounded cache:

  * key: the graph's content, built fresh from the graph at every call -- each node's op,
    sources, arg, dtype, shape, tag and name (values that == would merge told apart:
    -0.0 and 0.0, True and 1, 1 and 1.0, NaN), the roots, the graph's level and the level
    asked for, and the tables the validator read. Never the graph object's identity: a
    graph changed in place, or another graph with the same node count, gets its own entry.
    A graph whose args hold anything but JSON values (a Python object) is prepared afresh
    at every call and not kept.
  * entry: the validator's views and level, copies of the nodes (the caller may change its
    graph afterwards), and the plans made so far (per scope: nodes, roots, tracing).
    An invalid graph is never kept: it raises its diagnostics at every call.
  * bound: CACHE_SIZE graphs (TINYSPEC_EVAL_PLAN_CACHE overrides it at import; 0 keeps
    nothing) and CACHE_NODES nodes in all, the least recently used dropped first; a graph of
    more nodes than that is never kept. An entry holds no input and no value, only the
    graph's static facts (about a kilobyte per node).

Inputs are still checked at every call, against the entry's views (engine.Machine:
names, shapes, dtypes; rule eval.input).
"""
from __future__ import annotations
import math
import os
from collections import OrderedDict
from tinyspec.frozen import FrozenDict
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.plan import Plan

CACHE_SIZE = int(os.environ.get("TINYSPEC_EVAL_PLAN_CACHE", "64"))
CACHE_NODES = 1_000_000


class Uncacheable(Exception):
  """A graph value with no content key (a Python object in an arg): prepared, not kept."""


def content_key(v):
  """A hashable key of a JSON value that tells apart what == merges (as tinyspec.frozen.key)."""
  t = type(v)
  if v is None or t is str or t is int: return v
  if t is FrozenDict or t is dict:
    items = []
    for k, x in v.items():
      tx = type(x)
      items.append((k, x if x is None or tx is str or tx is int else content_key(x)))
    items.sort(key=_first)
    return ("d",) + tuple(items)
  if t is tuple or t is list: return ("l",) + tuple(content_key(x) for x in v)
  if t is float: return ("f", "nan" if math.isnan(v) else v.hex())
  if t is bool: return ("b", v)
  raise Uncacheable(t.__name__)


def _first(item): return item[0]


def _plain(v) -> bool: return v is None or type(v) is str


def graph_key(g: Graph, level: str) -> tuple:
  """The graph's content as one hashable tuple (see the module docstring)."""
  ck = content_key
  nodes = tuple((n.op, tuple(n.src), ck(n.arg), n.dtype if _plain(n.dtype) else ck(n.dtype), ck(n.shape),
                 n.tag if n.tag is None else ck(n.tag), n.name) for n in g.nodes)
  return (nodes, ck(g.roots), g.level, level)


class Prepared:
  """One graph's static facts: views, level, nodes, and its plans by scope."""

  def __init__(self, nodes: list, views: list, level: str | None):
    self.nodes, self.views, self.level = nodes, views, level
    self.plans: dict = {}
    self.checked: set = set()     # roots whose reachable ops engine.Machine._check_ops accepted
    self.closures: dict = {}
    self.widened = None           # the graph and Prepared of the `wide` variant (refimpl/widen.py)

  def plan(self, order, kernel: bool, roots, linear, tracing: bool) -> Plan:
    k = (tuple(order), kernel, tuple(roots), None if linear is None else tuple(linear), tracing)
    p = self.plans.get(k)
    if p is None: p = self.plans[k] = Plan(self.nodes, self.views, tracing, list(order), kernel, list(roots), linear)
    return p


_cache: OrderedDict = OrderedDict()


def _copy(n: Node) -> Node:
  c = Node._checked(n.op, tuple(n.src), n.arg)
  c.dtype, c.shape, c.tag, c.name = n.dtype, n.shape, n.tag, n.name
  return c


def _validated(g: Graph, level: str) -> Prepared:
  res = validate(g, level)
  if not res.ok:
    d = res.diagnostics
    lines = "\n".join(x.format() for x in d[:10]) + (f"\n... and {len(d) - 10} more" if len(d) > 10 else "")
    raise EvalError(f"the graph is invalid, nothing was evaluated:\n{lines}", d[0].node, d[0].op, d[0].rule, diagnostics=d,
                    exit_code=max(x.exit_code for x in d))
  return Prepared([_copy(n) for n in g.nodes], res.views, res.level)


def prepare(g: Graph, level: str = "auto") -> Prepared:
  """The graph's Prepared, from the cache when one of the same content is there; raises
  EvalError (the validator's diagnostics) for an invalid graph."""
  T = tables()
  try: key = (graph_key(g, level), id(T))
  except (Uncacheable, TypeError): return _validated(g, level)
  hit = _cache.get(key)
  if hit is not None and hit[0] is T:
    _cache.move_to_end(key)
    return hit[1]
  prep = _validated(g, level)
  if CACHE_SIZE > 0 and len(prep.nodes) <= CACHE_NODES:
    _cache[key] = (T, prep)
    while len(_cache) > CACHE_SIZE or sum(len(e.nodes) for _, e in _cache.values()) > CACHE_NODES: _cache.popitem(last=False)
  return prep


def clear() -> None:
  """Drop every entry (tests; a long-lived process that wants the memory back)."""
  _cache.clear()
