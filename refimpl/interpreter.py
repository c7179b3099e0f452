"""The definition of what a kernel computes: a plain interpreter that runs a kernel (or a
program) one point of its loops at a time, in the order decision kernel-loops gives.

    from tinyspec.refimpl.interpreter import interpret
    outputs = interpret(graph, {"param0": x})   # what evaluate() gives, bit for bit

`evaluate()` (refimpl/engine.py) is an optimization of this interpreter: there every loop is
an array axis, accumulations become one `ufunc.accumulate`, carried loops are stepped along
one axis only. tests/refimpl/test_refimpl_definition.py checks with Hypothesis that both
give the same bits on the kernel forms of the corpus, the fuzzer and imported tinygrad
programs. This file states the rules and nothing else; it is slow on purpose.

Loops. Every RANGE and SPECIAL is a loop. A node depends on the loops its sources depend on
(RANGE and SPECIAL on themselves); END and REDUCE close the RANGEs they list, a BARRIER the
local threads, a SINK everything. A node runs once per point of its loops, points in
lexicographic order of the loop order: SPECIALs first (by name), then RANGEs by id (in a
LINEAR, both by position). A RANGE's bound may depend on other loops: each point runs its own
number of iterations. A REG buffer is private to a thread, a LOCAL one to a workgroup: its
root counts as depending on those loops (and it ends with the kernel's SINK). Nodes run in
graph order, each at all of its points, except in a carried loop (below).

Values. A node's value at a point is an array of its own shape (() or a short vector),
computed from its sources' values at that point by the reference's unit of the op.

Storage (decision store-order). A STORE makes a new version of its storage: the version its
sources are ordered after, plus one write at this point. A node is ordered after everything
its sources are ordered after (a loop closer: at every point of the loops it closes). Versions
that are not ordered with each other merge into one whose writes come in graph order (the
STORE's node index; one STORE's writes in iteration order; refimpl/history.py). A read of storage materializes
its version: the initial contents, then every write that was made at the reader's own point of
the loops both depend on (no iteration sees another's writes), in order.

Carried loops (decision kernel-loops, AFTER.loop). An AFTER that lists a RANGE r (or a CAST of
it) reads what earlier iterations of r stored: loop r runs one iteration at a time (all the
nodes that depend on r, in graph order), and from its second point on, the AFTER reads the
storage as the previous point left it. Loop r runs anew at every point of the loops its
closers (END, REDUCE) depend on, so an AFTER listing r depends on those loops too.
"""
from __future__ import annotations
import heapq
import itertools
import numpy as np
from tinyspec.dispatch import input_name
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.refimpl.engine import as_graph
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import EFFECT_ROLES, UNITS, role
from tinyspec.refimpl.numeric import NP, CLS, NARROW, VIA_F32, canonical_nan, down
from tinyspec.refimpl.alu import alu
from tinyspec.refimpl.ops.elementwise import truth
from tinyspec.refimpl.ops.reduce import identity, reduce_values
from tinyspec.refimpl.ops.source import byte_view
from tinyspec.refimpl.history import History, Write, merge, merge_all


def interpret(graph, inputs=None, *, level="auto", variants=()) -> dict:
  """Run a kernel- or program-level graph point by point. Inputs and outputs as in
  evaluate(); a BUFFER or PARAM without an input starts as zeros."""
  g = as_graph(graph)
  res = validate(g, level)
  if not res.ok: raise EvalError(f"the graph is invalid: {res.diagnostics[0].format()}", rule="eval.input")
  if res.level not in ("kernel", "program"):
    raise EvalError(f"the interpreter runs kernels and programs, not a {res.level}-level graph", rule="eval.unsupported")
  with np.errstate(all="ignore"):
    return Interpreter(g, res.views, inputs or {}, frozenset(variants)).run()


class UnitCtx:
  """What a value unit reads of its node (refimpl/unit.py), at one point: no loop axes."""
  R, kernel = 0, True

  def __init__(self, interp, i):
    self.i, self.node, self.view = i, interp.nodes[i], interp.views[i]
    self.s, self.m, self.views = self, interp, interp.views

  op = property(lambda self: self.node.op)
  arg = property(lambda self: self.node.arg)
  dtype = property(lambda self: self.view.dtype)
  shape = property(lambda self: self.view.shape)
  def src_dtype(self, k): return self.views[self.node.src[k]].dtype
  def src_shape(self, k): return self.views[self.node.src[k]].shape

  def shape_value(self, k):
    v = self.views[self.node.src[k]].value
    return v if isinstance(v, tuple) else (v,)


class Interpreter:
  def __init__(self, g, views, inputs: dict, variants: frozenset):
    self.g, self.nodes, self.views, self.variants = g, g.nodes, views, variants
    self.inputs = {(input_name("BUFFER", {"slot": k}) if isinstance(k, int) else k): v for k, v in inputs.items()}
    self.T = tables()
    self.value: dict[int, dict] = {}       # node -> {point: value}
    self.effect: dict[int, dict] = {}      # node -> {point: {storage key: History}}
    self.carried: dict = {}                # storage key -> the other loops -> their point -> the version the latest point of a carried loop left there
    self.storage: dict = {}                # storage key -> (initial contents, the empty History)
    self.seen: dict = {}                   # (History, the reader's point) -> the contents it reads
    roots = g.root_indices
    self.roots, self.order = roots, self._closure(roots)
    self.linear = self._linear()
    self._loops()
    self._axes()
    self._if_blocks()
    self.carried_ranges = {r for i in self.order if role(self.nodes[i].op) == "after" for r in self.listed_ranges(i)}
    self.run_order = self._run_order()
    self.users: dict[int, list] = {}
    for i in self.order:
      for j in self.nodes[i].src: self.users.setdefault(j, []).append(i)

  # ---------------------------------------------------------------- static facts
  def _closure(self, roots) -> list[int]:
    seen, stack = set(), list(roots)
    while stack:
      i = stack.pop()
      if i not in seen: seen.add(i); stack.extend(self.nodes[i].src)
    return sorted(seen)

  def _linear(self) -> list | None:
    r = self.roots[-1]
    n = self.nodes[r]
    lin = r if n.op == "LINEAR" else n.src[0] if n.op == "PROGRAM" else None
    return list(self.nodes[lin].src) if lin is not None else None

  def _loops(self):
    """The loop order of decision kernel-loops."""
    loops = [i for i in self.order if role(self.nodes[i].op) == "loop"]
    pos = {n: k for k, n in enumerate(self.linear or ())}
    def key(i):
      n = self.nodes[i]
      if self.linear is not None: return (n.op != "SPECIAL", pos.get(i, 0), i)
      return (n.op != "SPECIAL", str(n.arg.get("name", "")) if n.op == "SPECIAL" else "", n.arg.get("id", 0) if n.op == "RANGE" else 0, i)
    self.loops = sorted(loops, key=key)
    self.rank = {r: k for k, r in enumerate(self.loops)}
    types = {r: (self.nodes[r].arg.get("type") if self.nodes[r].op == "RANGE" else None) for r in self.loops}
    special = {r for r in self.loops if self.nodes[r].op == "SPECIAL"}
    self.local_loops = {r for r in self.loops if types[r] == "LOCAL" or (r in special and str(self.nodes[r].arg.get("name", "")).startswith("l"))}
    self.private = {"REG": special, "LOCAL": (special - self.local_loops) | {r for r in self.loops if types[r] in ("GLOBAL", "THREAD")}}

  def _axes(self):
    """axes[i]: the loops node i depends on, in loop order; closes[i]: the loops of its
    sources it closes; ordered[i]: whether a STORE is among what it depends on. An AFTER
    that lists loop r also depends on the loops r runs in (those of the nodes closing r):
    it reads what r's iterations at its own point of them stored."""
    enclosing: dict[int, set] = {}
    while True:
      self._axes_pass(enclosing)
      wider = {a: set().union(*(self.axes[c] for r in self.listed_ranges(a) for c in self.closers.get(r, ())))
               for a in self.order if role(self.nodes[a].op) == "after"}
      if all(w <= set(self.axes[a]) for a, w in wider.items()): return
      enclosing = {a: w | enclosing.get(a, set()) for a, w in wider.items()}

  def _axes_pass(self, enclosing: dict):
    self.axes: dict[int, tuple] = {}
    self.closes: dict[int, tuple] = {}
    self.closers: dict[int, list] = {}   # RANGE -> the nodes that close it
    self.ordered: dict[int, bool] = {}
    self.effect_sources: dict[int, list] = {}
    for i in self.order:
      n = self.nodes[i]
      s = set(enclosing.get(i, ()))
      for j in n.src: s.update(self.axes[j])
      r = role(n.op)
      if r == "loop": s.add(i)
      elif r in ("close", "reduce"):
        s.difference_update(n.src[1:])
        for x in n.src[1:]: self.closers.setdefault(x, []).append(i)
      elif r == "barrier": s -= self.local_loops
      elif r == "sink": s = set()
      elif r == "storage": s |= self.private.get(n.arg.get("addrspace", "GLOBAL"), set())
      self.axes[i] = tuple(sorted(s, key=self.rank.get))
      inner = {a for j in n.src for a in self.axes[j]}
      self.closes[i] = tuple(a for a in sorted(inner, key=self.rank.get) if a not in s)
      self.ordered[i] = r == "store" or any(self.ordered[j] for j in n.src)   # ordered after some STORE
      # the sources whose order it inherits: a source another source uses adds nothing (a LINEAR lists every node)
      used = {x for j in set(n.src) for x in self.nodes[j].src}
      self.effect_sources[i] = [j for j in dict.fromkeys(n.src) if self.ordered[j] and j not in used]

  def _run_order(self) -> list[int]:
    """Graph order, except that a private buffer comes after the thread loops it is per point of."""
    deps = {i: set(self.nodes[i].src) | (set(self.axes[i]) if role(self.nodes[i].op) == "storage" else set()) for i in self.order}
    users: dict[int, list] = {}
    for i, d in deps.items():
      for j in d: users.setdefault(j, []).append(i)
    waiting = {i: len(d) for i, d in deps.items()}
    ready = [i for i in self.order if not waiting[i]]
    heapq.heapify(ready)
    out = []
    while ready:
      i = heapq.heappop(ready)
      out.append(i)
      for u in users.get(i, ()):
        waiting[u] -= 1
        if not waiting[u]: heapq.heappush(ready, u)
    return out

  def _if_blocks(self):
    """ifs[i]: the IFs whose gate node i runs under (the ones it depends on, not through their
    ENDIF nor through an effect: what is ordered after a gated STORE is not gated; in a
    LINEAR also the blocks its position lies in)."""
    self.ifs: dict[int, frozenset] = {}
    inside: dict[int, frozenset] = {}
    stack: list[int] = []
    for i in self.linear or ():
      op = role(self.nodes[i].op)
      if op == "endif" and self.nodes[i].src[0] in stack: stack.remove(self.nodes[i].src[0])
      inside[i] = frozenset(stack)
      if op == "if": stack.append(i)
    for i in self.order:
      n = self.nodes[i]
      s = set(inside.get(i, ()))
      for j in n.src:
        if role(self.nodes[j].op) not in EFFECT_ROLES: s |= self.ifs[j]
      if role(n.op) == "if": s.add(i)
      elif role(n.op) == "endif": s.discard(n.src[0])
      self.ifs[i] = frozenset(s)

  def listed_ranges(self, a) -> list[int]:
    """The RANGEs an AFTER lists among its dependencies (itself, or through CASTs)."""
    out = []
    for j in self.nodes[a].src[1:]:
      while self.nodes[j].op in ("CAST", "BITCAST") and self.nodes[j].src: j = self.nodes[j].src[0]
      if self.nodes[j].op == "RANGE": out.append(j)
    return out

  # ---------------------------------------------------------------- points
  def at(self, j, point: dict) -> tuple:
    return tuple(point[a] for a in self.axes[j])

  def points(self, axes, fixed: dict):
    """Every point of the loops `axes` that agrees with `fixed`, in lexicographic order of
    the loop order; a loop runs to its own bound at the point (which may depend on other loops)."""
    base = {a: t for a, t in fixed.items() if a not in axes}
    extents = [[fixed[r]] if r in fixed else range(self.extent(r)) for r in axes]
    for combo in itertools.product(*extents):
      point = {**base, **dict(zip(axes, combo))}
      if all(point[r] < self.bound(r, point) for r in axes): yield point

  def bound(self, r, point) -> int:
    return int(self.get(self.nodes[r].src[0], point).reshape(-1)[0])

  def extent(self, r) -> int:
    """The largest bound loop r has at any point its bound ran at."""
    return max((int(np.max(v)) for v in self.value.get(self.nodes[r].src[0], {}).values()), default=0)

  def get(self, j, point):
    try: return self.value[j][self.at(j, point)]
    except KeyError:
      raise EvalError(f"node {j} is needed at a point where it did not run (a loop bound depends on an inner loop?)",
                      j, self.nodes[j].op, rule="eval.unsupported") from None

  def eff(self, j, point) -> dict:
    """What node j is ordered after at `point`. Where j did not run (an empty loop, an
    iteration past a bound, a loop `point` does not fix), what its sources are ordered after."""
    if not self.ordered[j]: return {}
    key = tuple(point.get(a) for a in self.axes[j])
    if key in self.value.get(j, ()): return self.effect.get(j, {}).get(key) or {}
    return merge_all(self.eff(s, point) for s in self.nodes[j].src)

  # ---------------------------------------------------------------- the run
  def run(self) -> dict:
    self.run_nodes(self.run_order, {})
    return self.outputs()

  def run_nodes(self, nodes: list, fixed: dict):
    """Run nodes (in graph order) at every point that agrees with fixed; a carried loop
    runs one iteration at a time."""
    k = 0
    while k < len(nodes):
      i = nodes[k]
      loop = next((r for r in self.axes[i] if r in self.carried_ranges and r not in fixed), None)
      if loop is None:
        for point in self.points(self.axes[i], fixed): self.step(i, point)
        k += 1
        continue
      body = [j for j in nodes[k:] if loop in self.axes[j]]
      end = nodes.index(body[-1])
      later = set(body)   # the loop's nodes, and the nodes between them that need the whole loop (closers)
      for j in nodes[k:end]:
        if any(s in later for s in self.nodes[j].src): later.add(j)
      if any(s in later and s not in body for j in body for s in self.nodes[j].src):
        raise EvalError(f"RANGE {loop} is used again after a node that closes it", loop, "RANGE", rule="eval.unsupported")
      self.run_nodes([j for j in nodes[k:end] if j not in later], fixed)   # independent of the loop: run before it
      self.run_carried(loop, body, fixed)
      nodes = [j for j in nodes[k:end] if j in later and j not in body] + nodes[end + 1:]
      k = 0

  def run_carried(self, loop, body, fixed):
    inside = set(body)
    last = [j for j in body if self.ordered[j] and not any(s in inside for s in self.users.get(j, ()))]   # what the others are ordered before
    for t in range(self.extent(loop)):
      here = {**fixed, loop: t}
      self.run_nodes(body, here)
      for j in last:
        for p in self.points(self.axes[j], here):
          for key, h in self.effect.get(j, {}).get(self.at(j, p), {}).items(): self.remember(key, j, p, h)

  def remember(self, key, node, point, h):
    """h is the state a point of a carried loop left, where the other loops are at `point`."""
    axes = tuple(a for a in self.axes[node] if a not in self.carried_ranges)
    group = self.carried.setdefault(key, {}).setdefault(axes, {})
    at = tuple(point[a] for a in axes)
    group[at] = merge(group.get(at), h)

  def latest(self, key, reader, point) -> History | None:
    """The state the previous points of the carried loops left for storage `key`, where the
    other loops are at the reader's `point` (a point where they are elsewhere wrote nothing
    the reader sees: see contents)."""
    mine = {a for a in self.axes[reader] if a not in self.carried_ranges}
    found = None
    for axes, group in self.carried.get(key, {}).items():
      if mine.issuperset(axes): found = merge(found, group.get(tuple(point[a] for a in axes)))
      else:
        for at, h in group.items():
          if all(point[a] == v for a, v in zip(axes, at) if a in mine): found = merge(found, h)
    return found

  def step(self, i, point):
    n = self.nodes[i]
    r = role(n.op)
    eff = {}
    ordered = self.effect_sources[i]
    if ordered:   # a closer is ordered after every point of the loops it closes (or, with none, after what they are)
      at = list(self.points(self.closes[i], point)) if self.closes[i] else [point]
      eff = merge_all(self.eff(j, p) for p in at or [point] for j in ordered)
    value, eff = self.compute(i, n, r, point, eff)
    if r == "sink": eff = {k: h for k, h in eff.items() if isinstance(k, str)}   # REG and LOCAL storage ends with the kernel
    key = self.at(i, point)
    self.value.setdefault(i, {})[key] = value
    if eff: self.effect.setdefault(i, {})[key] = eff

  def compute(self, i, n, r, point, eff):
    if r == "loop": return np.asarray(point[i], NP[self.views[i].dtype]), eff
    if r == "storage": return self.contents(i, None, point), eff
    if r == "after": return self.after(i, n, point, eff)
    if r in ("through", "view"):
      x = self.get(n.src[0], point)
      return self.link(i, x, point), eff
    if r == "store": return None, self.store(i, n, point, eff)
    if r == "gated_load":
      x = self.get(n.src[0], point)
      if len(n.src) < 3: return x, eff
      return np.where(truth(self.get(n.src[2], point)), x, self.get(n.src[1], point)), eff
    if r == "reduce": return self.reduce(i, n, point), eff
    if r == "if": return truth(self.get(n.src[0], point)), eff
    if r in ("close", "barrier", "endif", "effect", "sink"): return None, eff
    if r is not None or UNITS[n.op].raw:
      raise EvalError(f"the interpreter has no rule for {n.op}", i, n.op, rule="eval.unsupported")
    return self.unit(i, n, point), eff

  def unit(self, i, n, point):
    u = UNITS[n.op]
    val = np.asarray(u.fn(UnitCtx(self, i), *[self.get(j, point) for j in n.src]))
    dt = self.views[i].dtype
    if self.T.ops[n.op].nan == "canonical" and CLS.get(dt) == "float": val = canonical_nan(val, dt)
    return val

  # ---------------------------------------------------------------- storage
  def root(self, i) -> int | None:
    """The storage root of a chain node (None for AFTER over a value: a tensor-level form)."""
    while role(self.nodes[i].op) != "storage":
      if role(self.nodes[i].op) not in ("through", "view", "after", "store") or not self.nodes[i].src: return None
      i = self.nodes[i].src[0]
    return i

  def key(self, root):
    a = self.nodes[root].arg
    if a.get("addrspace", "GLOBAL") != "GLOBAL": return ("local", root)
    return input_name(self.nodes[root].op, a)

  def initial(self, root) -> np.ndarray:
    view, k = self.views[root], self.key(root)
    if k not in self.storage:
      x = self.inputs.get(k) if isinstance(k, str) else None
      x = np.zeros(view.shape, NP[view.dtype]) if x is None else np.asarray(x, NP[view.dtype]).reshape(view.shape)
      self.storage[k] = (x, History(k))
    return self.storage[k][0]

  def base(self, root) -> History:
    self.initial(root)
    return self.storage[self.key(root)][1]

  def contents(self, root, history, point, reader=None) -> np.ndarray:
    """The storage as `history` leaves it, seen at `point` by node `reader`: the writes
    made at the reader's own point of the loops both depend on, in order, over the initial
    contents. (Each version's contents are kept, so a longer history costs one write more.)"""
    if history is None: return np.array(self.initial(root))
    mine = tuple((a, point[a]) for a in self.axes[reader] if a not in self.listed_ranges(reader)) if reader is not None else ()
    at, todo, h = dict(mine), [], history
    while h is not None and (h, mine) not in self.seen: todo.append(h); h = h.parent
    state = np.array(self.initial(root)) if h is None else self.seen[(h, mine)].copy()
    for h in reversed(todo):
      w = h.write
      if w is not None and w.on and all(at.get(a, t) == t for a, t in w.point): apply(state.reshape(-1), w)
      self.seen[(h, mine)] = state.copy()
    return state

  def after(self, i, n, point, eff):
    root = self.root(i)
    if root is None:
      raise EvalError("AFTER over a value that is not storage is a tensor-level form", i, n.op, rule="eval.unsupported")
    k = self.key(root)
    listed = self.listed_ranges(i)
    prev = self.latest(k, i, point) if listed and any(point[r] > 0 for r in listed) else None
    if prev is not None: eff = {**eff, k: prev}   # a carried read: the state the previous point left
    x = self.contents(root, eff.get(k), point, i)
    for link in self.chain_below(n.src[0]): x = self.link(link, x, point)
    return x, eff

  def chain_below(self, j) -> list[int]:
    out = []
    while role(self.nodes[j].op) != "storage": out.append(j); j = self.nodes[j].src[0]
    return [x for x in out[::-1] if role(self.nodes[x].op) != "after"]

  def link(self, i, x, point):
    """An INDEX (outer indexing from the left, out of range reads zero: decisions index-oob,
    pad-fill), a BUFFER_VIEW or a marker applied to x."""
    n = self.nodes[i]
    if n.op == "BUFFER_VIEW": return byte_view(x, 0, n.arg["offset"], n.arg["size"], NP[n.arg["dtype"]])
    if role(n.op) == "through" and len(n.src) > 1: return outer_index(x, [self.get(j, point) for j in n.src[1:]], 0)
    return x

  def store(self, i, n, point, eff):
    root = self.root(n.src[0])
    self.initial(root)
    k = self.key(root)
    add = self.views[n.src[1]].dtype if n.op == "ATOMICADD" else None   # ATOMICADD: the dtype it adds in
    on = all(bool(self.get(f, point)) for f in self.ifs[i])
    if len(n.src) > 2 and not add: on = on and bool(truth(self.get(n.src[2], point)))
    path = []
    chain = [n.src[0]]
    while role(self.nodes[chain[-1]].op) != "storage": chain.append(self.nodes[chain[-1]].src[0])
    for j in chain[::-1]:
      m = self.nodes[j]
      if m.op == "BUFFER_VIEW": path.append(("view", (m.arg["offset"], m.arg["size"], NP[m.arg["dtype"]]), self.views[j].shape))
      elif role(m.op) == "through" and len(m.src) > 1: path.append(("index", [self.get(x, point) for x in m.src[1:]], self.views[m.src[0]].shape))
    w = Write(i, tuple((a, point[a]) for a in self.axes[i]), path, self.get(n.src[1], point), on, add)
    return {**eff, k: History(k, eff.get(k) or self.base(root), w)}

  # ---------------------------------------------------------------- reduce
  def reduce(self, i, n, point):
    op, dt = n.arg["op"], self.views[i].dtype
    ranges = self.closes[i]
    if len(n.src) == 1: return reduce_values(op, self.get(n.src[0], point), tuple(n.arg.get("axes", ())), dt)
    xs = [self.get(n.src[0], p) for p in self.points(ranges, point)]
    if op == "MAX": acc = largest(xs, dt)
    else:   # decision reduce-empty: from the identity, in iteration order; float16/bfloat16 in float32, rounded once
      wide = "float32" if dt in NARROW else dt
      acc = identity(op, dt).astype(NP[wide])
      for x in xs: acc = alu(op, wide, acc, np.asarray(x).astype(NP[wide]))
      acc = down(np.asarray(acc), dt)
    return canonical_nan(acc, dt) if CLS[dt] == "float" else acc

  def outputs(self) -> dict:
    """out{k} for a root that is a value; the final contents of every GLOBAL storage a STORE
    of the graph targets (whether or not it ran), by its input name."""
    out, effs = {}, []
    for k, r in enumerate(self.roots):
      if self.views[r].dtype == "void": effs.append(self.eff(r, {}))
      else: out[f"out{k}"] = np.array(self.get(r, {}))
    final = merge_all(effs)
    for s in self.order:
      root = self.root(self.nodes[s].src[0]) if role(self.nodes[s].op) == "store" else None
      if root is not None and isinstance(self.key(root), str) and self.key(root) not in out:
        out[self.key(root)] = self.contents(root, final.get(self.key(root)), {})
    return out


def largest(xs, dt) -> np.ndarray:
  """Decision reduce-max: the largest element that is not NaN, +0 above -0; -inf (the
  identity) when there is none. For bool: any. bfloat16 and the float8s are compared in
  float32, from float32's -inf (a float8 without inf would start from NaN), and rounded back
  (exact for an element; -inf becomes what the dtype makes of it)."""
  wide = "float32" if dt in VIA_F32 else dt
  best = identity("MAX", wide)
  for x in xs:
    f = np.asarray(x).astype(NP[wide])
    better = f > best
    if CLS[dt] == "float": better = (better | ((f == 0) & (best == 0) & np.signbit(best) & ~np.signbit(f))) & ~np.isnan(f)
    best = np.where(better, f, best)
  return down(np.asarray(best), dt) if wide != dt else np.asarray(best).astype(NP[dt])


def outer_index(x: np.ndarray, idxs: list, fill) -> np.ndarray:
  """x indexed from the left by () or (k,) indices (outer: their dims side by side); an index
  out of range gives `fill`."""
  idxs = [np.asarray(a) for a in idxs]
  total = sum(a.ndim for a in idxs)
  index, ok, off = [], np.ones((1,) * total, bool), 0
  for d, a in enumerate(idxs):
    a = a.reshape((1,) * off + a.shape + (1,) * (total - off - a.ndim))
    off += np.ndim(idxs[d])
    valid = (a >= 0) & (a < x.shape[d])
    ok = ok & valid
    index.append(np.where(valid, a, 0).astype(np.intp))
  safe = x if all(x.shape[d] for d in range(len(idxs))) else np.zeros(tuple(max(s, 1) for s in x.shape), x.dtype)
  got = safe[tuple(index)]
  return np.where(ok.reshape(ok.shape + (1,) * (got.ndim - ok.ndim)), got, np.asarray(fill, x.dtype))


def apply(flat: np.ndarray, w: Write):
  """Write w into the flat contents of its storage, element by element in order (the last
  write to an element wins); an element out of range is not written (decision index-oob).
  ATOMICADD adds with ADD's unit."""
  region = flat
  ids = np.arange(flat.size)
  for kind, data, src_shape in w.path:
    if kind == "view":
      off, size, dt = data
      region = region.view(np.uint8)[off:off + size * dt.itemsize].view(dt)
      ids = np.arange(region.size)
    else:
      ids = outer_index(ids.reshape(src_shape), data, -1)
  values = np.broadcast_to(np.asarray(w.value), ids.shape)
  for pos, v in zip(ids.reshape(-1).tolist(), values.reshape(-1)):
    if pos < 0: continue
    if w.add:
      v = alu("ADD", w.add, region[pos], v)
      if CLS[w.add] == "float": v = canonical_nan(np.asarray(v), w.add)
    region[pos] = v
