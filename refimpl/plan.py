"""Static analysis of one scope (the nodes one evaluation pass runs), done once before
any value is computed. Linear-time, iterative passes over the scope's nodes in order.

What it finds:
  * consumers of every node (for freeing values after their last use);
  * storage chains: for each link (INDEX, AFTER, BUFFER_VIEW, marker) the storage root
    it leads to, and whether its value is READ at all (an INDEX that is only a STORE
    target is never gathered);
  * the REDUCE(ADD) over a large broadcast MUL that is computed as one einsum;
  * in kernels: the loop axes (one per RANGE/SPECIAL), the axes each node varies over,
    the IF blocks it sits in, which reads are gated, and the loops that carry a
    dependency through storage (see refimpl/loops.py).
"""
from __future__ import annotations
from collections import defaultdict
from tinyspec.refimpl.registry import EFFECT_ROLES, role
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import UNITS
from tinyspec.refimpl.carried import find_carried, listed_ranges
from tinyspec.refimpl.affine import analyse
from tinyspec.refimpl.numeric import NATIVE_FLOATS

FUSE_MIN_ELEMENTS = 1 << 22   # a broadcast product bigger than this is reduced by einsum, never built


def _numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


class Plan:
  def __init__(self, nodes: list, views: list, tracing: bool, order: list[int], kernel: bool, roots: list[int],
               linear: list[int] | None = None):
    self.nodes, self.views, self.tracing = nodes, views, tracing   # the graph's nodes and validated views
    self.order, self.kernel, self.roots = order, kernel, roots
    self.uses: dict[int, list] = defaultdict(list)
    self.data_uses: dict[int, list] = defaultdict(list)   # without SINK/LINEAR listing it
    self.listing: set[int] = set()   # the SINK/LINEAR/PROGRAM nodes: they list their sources for effects only
    self._use_counts: tuple | None = None
    for i in order:
      sink = role(nodes[i].op) == "sink"
      if sink: self.listing.add(i)
      for k, j in enumerate(nodes[i].src):
        self.uses[j].append((i, k))
        if not sink: self.data_uses[j].append((i, k))
    self._chains(nodes)
    self.fused: dict[int, int] = {}     # MUL node -> the REDUCE that consumes it as a sum of products
    self.deferred: set[int] = set()     # not evaluated in order (fused, or computed by their consumer)
    self._fusion(nodes)
    self.naxes = 0
    self.axes: dict[int, int] = {}
    self.axis_of: dict[int, int] = {}
    self.ifs: dict = {}
    self.gated: set[int] = set()
    self.reductions: dict = {}
    self.sequential: dict = {}
    self.in_loop: set[int] = set()
    self.private: dict[str, int] = {}
    self.info: dict = {}   # node -> what Scope.step needs of it (Scope.node_info), filled on first use
    self.forms: dict = {}
    self.affine: dict = {}
    self.affine_targets: dict = {}
    self.lazy: set[int] = set()
    if kernel: self._kernel(nodes, linear)
    self.constant = self._constants(nodes)
    self.const_values: dict = {}   # constant node -> its value (read-only), from the first evaluation that computed it

  def use_counts(self) -> tuple[dict, dict]:
    """Each node's uses of any kind and its uses as a value (a LINEAR or SINK lists a node for
    its effects only), the extra uses of index values included: where Scope starts counting
    down (it copies them)."""
    if self._use_counts is None:
      counts = {j: len(self.uses.get(j, ())) for j in self.order}
      value_uses = {j: len(self.data_uses.get(j, ())) for j in self.order}
      for extra in self.extra.values():
        for j in extra:
          counts[j] = counts.get(j, 0) + 1
          value_uses[j] = value_uses.get(j, 0) + 1
      self._use_counts = (counts, value_uses)
    return self._use_counts

  def _constants(self, nodes) -> set:
    """Nodes whose value the graph alone fixes: CONST and VCONST, and the plain value ops
    (no storage, loop or effect role) of them -- computed once per plan, not per call."""
    out: set[int] = set()
    if self.tracing: return out
    for i in self.order:
      n = nodes[i]
      u = UNITS.get(n.op)
      if u is None or u.raw or u.role is not None: continue
      if (n.op in ("CONST", "VCONST") and not n.src) or (n.src and all(j in out for j in n.src)): out.add(i)
    return out

  # ---------------------------------------------------------------- storage chains
  def _chains(self, nodes):
    self.root: dict[int, int] = {}    # chain node -> its storage root node
    for i in self.order:
      n = nodes[i]
      r = role(n.op)
      if r == "storage": self.root[i] = i
      elif r in ("through", "view", "after") and n.src and n.src[0] in self.root: self.root[i] = self.root[n.src[0]]
    # links whose index values a later node still needs (a STORE's target, an AFTER's
    # chain, a kernel CALL's arguments): counted as extra uses so they stay alive
    self.extra: dict[int, list] = {}
    for i in self.order:
      n = nodes[i]
      r = role(n.op)
      targets = n.src[:1] if r in ("store", "after") else n.src[1:] if r == "call" else ()
      extra = [j for t in targets for link in self.chain_links(t) if role(nodes[link].op) == "through" for j in nodes[link].src[1:]]
      if extra: self.extra[i] = extra
    self.read: set[int] = set()
    rootset = set(self.roots)
    for i in reversed(self.order):
      if i not in self.root: continue
      if i in rootset or any(self._reads(c, k) for c, k in self.uses[i]): self.read.add(i)

  def _reads(self, c, k) -> bool:
    r = role(self.nodes[c].op)
    if r == "store": return k != 0
    if r in ("after", "through", "view"): return c in self.read if k == 0 else r == "through"
    if r in ("effect", "sink", "close", "barrier", "endif"): return False
    if r == "reduce": return k == 0
    if r == "if": return k == 0
    return True

  def chain_links(self, i) -> list[int]:
    """The chain from the storage root (exclusive) down to i (inclusive)."""
    out = []
    nodes = self.nodes
    while self.root.get(i, i) != i:
      out.append(i)
      i = nodes[i].src[0]
    return out[::-1]

  # ---------------------------------------------------------------- REDUCE(ADD) of a product
  def _fusion(self, nodes):
    if self.tracing: return
    views = self.views
    for i in self.order:
      n = nodes[i]
      if n.op != "REDUCE" or n.arg.get("op") != "ADD" or not n.src: continue
      j = n.src[0]
      if nodes[j].op != "MUL" or len(self.data_uses[j]) != 1 or j in self.roots: continue
      if views[j].dtype not in NATIVE_FLOATS: continue
      size = _numel(views[j].shape) * self._static_loop_size(j, n)
      a, b = (views[s].shape for s in nodes[j].src)
      if size >= FUSE_MIN_ELEMENTS and size > 2 * max(_numel(a), _numel(b)):
        self.fused[j] = i
        self.deferred.add(j)

  def _static_loop_size(self, j, reduce_node) -> int:
    if not self.kernel: return 1
    size = 1
    for r in reduce_node.src[1:]:
      mm = self.views[self.nodes[r].src[0]].min_max
      size *= max(int(mm[1]), 1) if mm else 1
    return size

  # ---------------------------------------------------------------- kernels
  def _loop_axes(self, nodes, local_bits):
    """axes[i]: the loop axes node i varies over (interpreter.Interpreter._axes): those of its
    sources, its own, less those it closes; an AFTER listing loop r also the loops r runs in
    (those of the nodes closing r), a fixed point."""
    enclosing: dict[int, int] = {}
    while True:
      axes, closers = self._axes_pass(nodes, local_bits, enclosing)
      wider = {}
      for a in self.order:
        if role(nodes[a].op) != "after": continue
        w = 0
        for r in listed_ranges(nodes, a):
          for c in closers.get(r, ()): w |= axes[c]
        if w & ~axes[a]: wider[a] = w | enclosing.get(a, 0)
      if not wider: break
      enclosing.update(wider)
    self.axes = axes

  def _axes_pass(self, nodes, local_bits, enclosing: dict) -> tuple[dict, dict]:
    axes: dict[int, int] = {}
    closers: dict[int, list] = {}   # RANGE -> the nodes that close it
    for i in self.order:
      n = nodes[i]
      mask = enclosing.get(i, 0)
      for j in n.src: mask |= axes.get(j, 0)
      r = role(n.op)
      if r == "loop": mask |= 1 << self.axis_of[i]
      elif r in ("close", "reduce"):
        for j in n.src[1:]:
          closers.setdefault(j, []).append(i)
          if j in self.axis_of: mask &= ~(1 << self.axis_of[j])
      elif r == "barrier": mask &= ~local_bits
      elif r == "sink": mask = 0
      axes[i] = mask
    return axes, closers

  def _kernel(self, nodes, linear):
    views = self.views
    loops = [i for i in self.order if role(nodes[i].op) == "loop"]
    if linear is not None:
      pos = {n: k for k, n in enumerate(linear)}
      loops.sort(key=lambda i: (nodes[i].op != "SPECIAL", pos.get(i, 0)))
    else:   # parallel thread indices outermost, then loops by their id (lower id = outer)
      loops.sort(key=lambda i: (nodes[i].op != "SPECIAL", str(nodes[i].arg.get("name", "")) if nodes[i].op == "SPECIAL" else "",
                                nodes[i].arg.get("id", 0) if isinstance(nodes[i].arg, dict) else 0, i))
    self.axis_of = {r: d for d, r in enumerate(loops)}
    self.loop_nodes = loops
    self.naxes = len(loops)
    depth = max((len(views[i].shape) for i in self.order if isinstance(views[i].shape, tuple) and all(isinstance(d, int) for d in views[i].shape)), default=0)
    if self.naxes + depth > 60:
      raise EvalError(f"the kernel has {self.naxes} loop axes; with values of rank {depth} that is more array axes than NumPy allows", rule="eval.unsupported")
    local_bits = thread_bits = group_bits = 0
    for r in loops:
      kind = nodes[r].arg.get("type") if nodes[r].op == "RANGE" and isinstance(nodes[r].arg, dict) else None
      if kind == "LOCAL": local_bits |= 1 << self.axis_of[r]                     # a kernel's work-item axis (an lidx to be)
      elif kind in ("GLOBAL", "THREAD"): group_bits |= 1 << self.axis_of[r]       # a kernel's work-group axis
      if nodes[r].op != "SPECIAL": continue
      thread_bits |= 1 << self.axis_of[r]
      if str(nodes[r].arg.get("name", "")).startswith("l"): local_bits |= 1 << self.axis_of[r]
    # decision kernel-loops: a REG buffer is private to a thread (every point of the SPECIAL
    # axes has its own), a LOCAL buffer to a workgroup (every point of the other SPECIALs, or
    # in a kernel of the GLOBAL/THREAD RANGEs); a BARRIER closes the lidx SPECIALs and LOCAL RANGEs
    self.private = {"REG": thread_bits, "LOCAL": (thread_bits & ~local_bits) | group_bits}
    self._loop_axes(nodes, local_bits)
    # IF blocks: a node is inside every IF it depends on (not through the IF's ENDIF, nor
    # through an effect: a GROUP or END ordered after a gated STORE runs ungated); in a
    # LINEAR also inside every IF whose block its position falls in.
    self.ifs: dict[int, frozenset] = {}
    empty = frozenset()
    open_at: dict[int, frozenset] = {}
    if linear is not None:
      stack: list[int] = []
      for i in linear:
        r = role(nodes[i].op)
        if r == "endif" and nodes[i].src and nodes[i].src[0] in stack: stack.remove(nodes[i].src[0])
        open_at[i] = frozenset(stack)
        if r == "if": stack.append(i)
    for i in self.order:
      n = nodes[i]
      s = open_at.get(i, empty)
      for j in n.src:
        sj = self.ifs.get(j, empty) if role(nodes[j].op) not in EFFECT_ROLES else empty
        if sj: s = s | sj
      r = role(n.op)
      if r == "if": s = s | {i}
      elif r == "endif" and n.src: s = s - {n.src[0]}
      self.ifs[i] = s
    # reads whose every consumer gates them (LOAD with a gate): out-of-range is fine where the gate is false
    self.gated: set[int] = set()
    for i in self.order:
      if i in self.root and i in self.read and self.uses[i]:
        if all((role(nodes[c].op) == "gated_load" and k == 0 and len(nodes[c].src) == 3) or role(nodes[c].op) == "sink" for c, k in self.uses[i]):
          self.gated.add(i)
    self.carried = find_carried(self, nodes)
    analyse(self, nodes, views)   # index arithmetic as affine forms of the loop indices: forms, affine, affine_targets, lazy
