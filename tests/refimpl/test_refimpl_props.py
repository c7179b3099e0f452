"""Property: refimpl's vectorized evaluation of a random small kernel equals a plain
sequential interpreter of the same graph, written here point by point.

The kernels mix what rangeify and expand produce: elementwise statements over 0-2
RANGEs, REDUCE over 1-2 RANGEs, REG accumulators carried through 1-3 RANGEs (ADD, MUL,
MAX, MULACC and non-associative updates; one END over all the loops or one END each;
gated updates), in-place scans of a GLOBAL buffer, loop bounds that vary with an outer
loop, gated LOADs and STOREs, and indices that leave the buffer (decision index-oob:
zero / nothing). The interpreter (`Sequential`) knows nothing of how the
graphs were generated: it runs every effect once per point of the loops it depends on,
loops nested by RANGE id (decision kernel-loops), one Python scalar at a time."""
from __future__ import annotations
import itertools
import numpy as np
from hypothesis import given, settings, strategies as st, HealthCheck
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP
from tinyspec.validate import validate

XS = (5, 5)             # the shape of the input buffers X (exact-friendly values) and Y (any floats)
EXACT = [-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0]   # sums and products of these stay exact in float32


# ------------------------------------------------------------------ the sequential interpreter
class Sequential:
  """Run a kernel graph the way the loops say, one point and one scalar at a time.

  The SINK runs once per point of the SPECIALs (threads, outermost, ordered by name). An
  effect (STORE, END, GROUP) runs once per point of the RANGEs and SPECIALs it depends
  on; END runs its body for every point of its RANGEs (lexicographic, lower id outer),
  after the effects its body is ordered after that do not depend on them (those run even
  for no iteration). A STORE depending on an IF (not through its ENDIF) runs only where
  the IF's gate is true. A value is computed once per point of the loops it depends on.
  A read through AFTER(buf, deps...) first runs the effects among deps, then reads
  memory as it is."""

  def __init__(self, g, inputs):
    self.nodes = g.nodes
    self.root = g.root_indices[-1]
    self.mem: dict = {}
    for i, n in enumerate(self.nodes):
      if n.op == "PARAM": self.mem[i] = np.array(inputs[f"param{n.arg['slot']}"])
      elif n.op == "BUFFER": self.mem[i] = np.zeros(self.shape(n.src[0]), NP[n.arg["dtype"]])
    self.dtypes = [v.dtype for v in validate(g).views]   # only to know a REDUCE's identity
    self.deps = self._deps()
    self.ifs = self._ifs()
    self.done: set = set()
    self.values: dict = {}

  def shape(self, j): return tuple(self.nodes[j].arg["values"])

  def _deps(self):
    deps = []
    for i, n in enumerate(self.nodes):
      d = frozenset().union(*(deps[j] for j in n.src)) if n.src else frozenset()
      if n.op in ("RANGE", "SPECIAL"): d = d | {i}
      if n.op in ("END", "REDUCE"): d = d - set(n.src[1:])
      deps.append(d)
    return deps

  def _ifs(self):
    ifs = []
    for i, n in enumerate(self.nodes):
      f = frozenset().union(*(ifs[j] for j in n.src)) if n.src else frozenset()
      if n.op == "IF": f = f | {i}
      if n.op == "ENDIF": f = f - {n.src[0]}
      ifs.append(f)
    return ifs

  def key(self, i, env): return (i, tuple(sorted((r, env[r]) for r in self.deps[i])))

  def order(self, ranges): return sorted(ranges, key=lambda r: self.nodes[r].arg["id"])

  def points(self, ranges, env):
    """The points of `ranges` (nested by id) as environments extending env."""
    rs = self.order(ranges)
    sizes = [max(int(self.value(self.nodes[r].src[0], env)), 0) for r in rs]
    for p in itertools.product(*(range(n) for n in sizes)): yield {**env, **dict(zip(rs, p))}

  # effects
  def run(self):
    threads = sorted((i for i, n in enumerate(self.nodes) if n.op == "SPECIAL"), key=lambda i: self.nodes[i].arg["name"])
    sizes = [max(int(self.value(self.nodes[t].src[0], {})), 0) for t in threads]
    with np.errstate(all="ignore"):
      for p in itertools.product(*(range(n) for n in sizes)): self.execute(self.root, dict(zip(threads, p)))
    return self.mem

  def execute(self, i, env):
    n = self.nodes[i]
    if n.op not in ("SINK", "GROUP", "END", "STORE", "AFTER"): return
    k = self.key(i, env)
    if k in self.done: return
    self.done.add(k)
    if n.op in ("SINK", "GROUP", "AFTER"):
      for j in n.src: self.execute(j, env)
    elif n.op == "END":
      for j in self.outside(n.src[0], set(n.src[1:])): self.execute(j, env)   # what the loop is ordered after runs before it, even for no iteration
      for e in self.points(n.src[1:], env): self.execute(n.src[0], e)
    else:   # STORE(target, value[, gate])
      if not all(self.value(self.nodes[f].src[0], env) for f in self.ifs[i]): return   # inside an IF whose gate is false
      buf, at = self.place(n.src[0], env)
      v = self.value(n.src[1], env)
      if len(n.src) == 3 and not self.value(n.src[2], env): return
      if self.in_range(buf, at): self.mem[buf][at] = v

  def outside(self, i, ranges):
    """The effects node i depends on that do not depend on `ranges`, in graph order."""
    seen, stack = set(), [i]
    while stack:
      j = stack.pop()
      if j not in seen: seen.add(j); stack.extend(self.nodes[j].src)
    return [j for j in sorted(seen) if self.nodes[j].op in ("STORE", "END") and not self.deps[j] & ranges]

  def place(self, i, env):
    """(buffer node, index tuple) a storage expression points at; runs AFTER's effects."""
    n = self.nodes[i]
    if n.op in ("PARAM", "BUFFER"): return i, ()
    if n.op == "AFTER":
      for j in n.src[1:]: self.execute(j, env)
      return self.place(n.src[0], env)
    assert n.op == "INDEX", n.op
    buf, at = self.place(n.src[0], env)
    return buf, at + tuple(int(self.value(j, env)) for j in n.src[1:])

  def in_range(self, buf, at): return all(0 <= a < d for a, d in zip(at, self.mem[buf].shape))

  # values
  def value(self, i, env):
    k = self.key(i, env)
    if k not in self.values: self.values[k] = self.compute(i, env)
    return self.values[k]

  def compute(self, i, env):
    n = self.nodes[i]
    op, src = n.op, n.src
    v = lambda k: self.value(src[k], env)
    if op == "CONST": return scalar(n.arg["value"], n.arg["dtype"])
    if op in ("RANGE", "SPECIAL"): return np.int64(env[i])
    if op in ("INDEX", "AFTER"):
      buf, at = self.place(i, env)
      return self.mem[buf][at] if self.in_range(buf, at) else np.zeros((), self.mem[buf].dtype)[()]   # index-oob: zero
    if op == "LOAD": return self.value(src[0], env) if v(2) else v(1)   # the buffer is not read where the gate is false
    if op == "REDUCE":   # in iteration order; float16/bfloat16 ADD and MUL in float32, rounded once (decisions reduce-empty, reduce-one)
      dt = NP[self.dtypes[i]]
      wide = np.dtype(np.float32) if self.dtypes[i] in ("float16", "bfloat16") and n.arg["op"] != "MAX" else dt
      acc = identity(n.arg["op"], wide)
      fold = reduce_max if n.arg["op"] == "MAX" else lambda a, b: apply(n.arg["op"], a, b)
      points = list(self.points(src[1:], env))
      if len(points) == 1: return dt.type(self.value(src[0], points[0]))   # one element: itself, unchanged (decision reduce-one)
      for e in points: acc = fold(acc, wide.type(self.value(src[0], e)))
      return np.asarray(acc).astype(dt)[()]
    if op == "CAST": return np.asarray(v(0)).astype(NP[n.arg])[()]
    if op == "WHERE": return v(1) if v(0) else v(2)
    if op == "NEG": return -v(0)
    if op == "MULACC": return v(0) * v(1) + v(2)
    return apply(op, *(v(k) for k in range(len(src))))


def scalar(value, dtype):
  if isinstance(value, str): value = float(value)
  return np.asarray(value, NP[dtype])[()]


def reduce_max(acc, x):
  """decision reduce-max: the largest element that is not NaN, +0.0 above -0.0."""
  if x != x: return acc
  if acc == x == 0: return acc if not np.signbit(acc) else x
  return x if x > acc else acc


def apply(op, a, b):
  if op == "ADD": return a + b
  if op == "MUL": return a * b
  if op == "SUB": return a - b
  if op == "CMPLT": return np.bool_(a < b)
  if op == "CMPNE": return np.bool_(a != b)
  if op == "MAX":   # decision max-nan: b if a < b else a (a NaN operand: the first; equal zeros: the first)
    return b if a < b else a
  raise NotImplementedError(op)


def identity(op, dt):
  dt = np.dtype(dt)
  if op == "ADD": return dt.type(0)
  if op == "MUL": return dt.type(1)
  return dt.type(-np.inf) if dt.kind == "f" or dt.name == "bfloat16" else dt.type(np.iinfo(dt).min)


# ------------------------------------------------------------------ random kernels
class Gen:
  """Builds one random kernel from Hypothesis draws: statements writing their own output
  PARAMs (slot 3 on), reading X (slot 1) and Y (slot 2)."""

  def __init__(self, draw, dtype):
    self.draw, self.dt = draw, dtype
    self.b = Builder()
    b = self.b
    self.X = b.param(XS, dtype, 1)
    self.Y = b.param(XS, dtype, 2)
    self.next_id = 0
    self.ids: set = set()
    self.outs: dict = {}

  def num(self, v):
    """A constant of the kernel's dtype (the tables want a float for a float CONST)."""
    return self.b.const(v if isinstance(v, str) else (int(v) if self.dt == "int32" else float(v)), self.dt)

  def range(self, type_, outer=()):
    """A RANGE of 0-3 iterations (or, inside outer loops, sometimes as many as an outer
    index plus 0 or 1: a bound that varies). Ids in nesting order, or any unused ones."""
    b, draw = self.b, self.draw
    rid = self.next_id if draw(st.booleans()) else draw(st.integers(0, 40))
    self.next_id += 1
    while rid in self.ids: rid += 41
    self.ids.add(rid)
    if outer and draw(st.integers(0, 3)) == 0:
      r = draw(st.sampled_from(outer))
      return b.range(id=rid, type=type_, bound=b.ADD(r, b.const(draw(st.integers(0, 1)), "index")))
    return b.range(draw(st.integers(0, 3)), rid, type_)

  def index(self, scope):
    """An index: a loop index plus a small offset (may leave the buffer), or a constant."""
    b = self.b
    if scope and self.draw(st.booleans()):
      r = self.draw(st.sampled_from(scope))
      off = self.draw(st.sampled_from([0, 0, 1, -1, 2]))
      return r if off == 0 else b.ADD(r, b.const(off, "index"))
    return b.const(self.draw(st.integers(-1, 5)), "index")

  def read(self, scope, exact):
    b = self.b
    buf = self.X if exact or self.draw(st.booleans()) else self.Y
    at = b.INDEX(buf, self.index(scope), self.index(scope))
    if self.draw(st.integers(0, 3)) == 0:   # gated: reads alt where the gate is false
      gate = b.CMPLT(self.index(scope), b.const(self.draw(st.integers(0, 4)), "index"))
      return b.LOAD(at, self.num(self.draw(st.sampled_from([-1.0, 0.5])) if self.dt != "int32" else -1), gate)
    return at

  def expr(self, scope, depth, exact=False):
    b = self.b
    kind = self.draw(st.integers(0, 6)) if depth > 0 else self.draw(st.integers(0, 2))
    if kind <= 1: return self.read(scope, exact)
    if kind == 2:
      if scope and self.draw(st.booleans()): return b.CAST(self.draw(st.sampled_from(scope)), arg=self.dt)
      return self.num(self.draw(st.sampled_from([2, -1, 0])) if self.dt == "int32" else self.draw(st.sampled_from([0.5, -2.0, 0.0, -0.0])))
    if kind == 3: return b.NEG(self.expr(scope, depth - 1, exact))
    if kind == 4:
      x, y = self.expr(scope, depth - 1, exact), self.expr(scope, depth - 1, exact)
      return b.WHERE(b.CMPLT(x, y), x, y)
    op = self.draw(st.sampled_from(["ADD", "MUL", "MAX", "SUB"]))
    return b.add(op, self.expr(scope, depth - 1, exact), self.expr(scope, depth - 1, exact))

  def out_target(self, outer, sizes, collide=False):
    """A fresh output PARAM of the outer loops' sizes, indexed by the outer loops (or, with
    collide, by any indices: several points may write one element, or none in range)."""
    b = self.b
    slot = 3 + len(self.outs)
    out = b.param(tuple(sizes), self.dt, slot)
    self.outs[f"param{slot}"] = tuple(sizes)
    if not outer: return out
    if collide and self.draw(st.booleans()): return b.INDEX(out, *(self.index(outer) for _ in outer))
    return b.INDEX(out, *outer)

  def gated(self, target, value, over):
    """STORE, sometimes gated on one of the loops `over`."""
    b = self.b
    if over and self.draw(st.integers(0, 3)) == 0:
      return b.STORE(target, value, b.CMPNE(self.draw(st.sampled_from(over)), b.const(self.draw(st.integers(0, 2)), "index")))
    return b.STORE(target, value)

  def statement(self, outer, sizes):
    kind = self.draw(st.sampled_from(["elementwise", "reduce", "accumulator", "scan"]))
    return getattr(self, kind)(outer, sizes)

  def scan(self, outer, sizes):
    """An in-place scan of a GLOBAL buffer: out[..., r + 1] = f(out[..., r], out[..., r + 1]),
    read through AFTER(out, r) (each outer point has its own row)."""
    b = self.b
    slot = 3 + len(self.outs)
    out = b.param(tuple(sizes) + (5,), self.dt, slot)
    self.outs[f"param{slot}"] = tuple(sizes) + (5,)
    r = self.range("LOOP", outer)
    a = b.AFTER(out, r)
    nxt = b.ADD(r, b.const(1, "index"))
    prev, here = b.INDEX(a, *outer, r), b.INDEX(a, *outer, nxt)
    op = self.draw(st.sampled_from(["ADD", "MUL", "MAX", "affine"]))
    value = b.ADD(b.MUL(prev, self.num(2 if self.dt == "int32" else 0.5)), here) if op == "affine" else b.add(op, prev, here)
    return b.END(self.gated(b.INDEX(a, *outer, nxt), value, [r]), r)

  def elementwise(self, outer, sizes):
    b = self.b
    if not outer or self.draw(st.integers(0, 3)):
      return self.gated(self.out_target(outer, sizes, collide=True), self.expr(outer, 2), outer)
    # inside an IF block: IF(gate); STORE(INDEX(AFTER(out, IF), ...)); GROUP(store, ENDIF)
    f = b.IF(b.CMPLT(self.draw(st.sampled_from(outer)), b.const(self.draw(st.integers(0, 3)), "index")))
    tgt = self.out_target(outer, sizes)
    base = b.nodes[tgt].src[0]
    tgt = b.INDEX(b.AFTER(base, f), *b.nodes[tgt].src[1:])
    return b.GROUP(b.STORE(tgt, self.expr(outer, 2)), b.ENDIF(f))

  def reduce(self, outer, sizes):
    b = self.b
    rs = [self.range("REDUCE", outer) for _ in range(self.draw(st.integers(1, 2)))]
    op = self.draw(st.sampled_from(["ADD", "MUL", "MAX"]))
    # float ADD/MUL reduce in any order (decision reduce-empty): exact values keep the sum order-free
    x = self.expr(outer + rs, 0 if op == "MUL" else 2, exact=op != "MAX")
    return self.gated(self.out_target(outer, sizes), b.REDUCE(x, *rs, arg={"op": op}), outer)

  def accumulator(self, outer, sizes):
    """1-2 REG accumulators carried through the same 1-3 loops (tinygrad: acc.after(i).store(init);
    acc.after(init, *rs) read and stored in the loops; acc.after(END) read after them)."""
    b, draw = self.b, self.draw
    rs = [self.range("REDUCE", outer) for _ in range(draw(st.integers(1, 3)))]
    scope = outer + rs
    updates, finals = [], []
    for k in range(draw(st.integers(1, 2))):
      scalar_reg = draw(st.booleans())   # a ()-shaped register used without INDEX, or a (1,) one
      acc = b.buffer(() if scalar_reg else (1,), self.dt, len(self.outs) * 2 + k, addrspace="REG")
      at = (lambda s: s) if scalar_reg else (lambda s: b.INDEX(s, b.const(0, "index")))
      update = draw(st.sampled_from(["ADD", "ADD", "MUL", "MAX", "MULACC", "affine", "self", "stepwise"]))
      init = {"MUL": 1, "affine": 1, "self": 1, "MAX": "-inf" if self.dt != "int32" else -(2 ** 31)}.get(update, 0)
      init_st = b.STORE(at(b.AFTER(acc, *outer) if outer else acc), self.num(init))
      carried = b.AFTER(acc, init_st, *draw(st.permutations(rs)))
      cur = at(carried)
      x = self.expr(scope, 1)
      new = {"ADD": lambda: b.ADD(cur, x) if draw(st.booleans()) else b.ADD(x, cur), "MUL": lambda: b.MUL(cur, x),
             "MAX": lambda: b.MAX(cur, x), "MULACC": lambda: b.MULACC(x, self.expr(scope, 0), cur),
             "affine": lambda: b.ADD(b.MUL(cur, self.num(2 if self.dt == "int32" else 0.5)), x),   # not associative
             "self": lambda: b.ADD(cur, b.MUL(x, cur)), "stepwise": lambda: b.ADD(cur, x)}[update]()
      # the update stores through the carried AFTER (tinygrad) or into the register itself (the compiler's expand)
      upd = self.gated(at(carried if not scalar_reg and draw(st.booleans()) else acc), new, rs)
      if update == "stepwise":   # the running value is also stored at every point: the last one stays
        upd = b.GROUP(upd, b.STORE(self.out_target(outer, sizes), new))
      updates.append(upd)
      finals.append((acc, at))
    body = updates[0] if len(updates) == 1 else b.GROUP(*updates)
    if draw(st.booleans()): end = b.END(body, *rs)   # one END over every loop (the compiler's expand form)
    else:
      end = body
      for r in sorted(rs, key=lambda r: -b.nodes[r].arg["id"]): end = b.END(end, r)   # innermost first
    finals = [at(b.AFTER(acc, end)) for acc, at in finals]
    value = finals[0] if len(finals) == 1 else b.ADD(*finals)
    return self.gated(self.out_target(outer, sizes), value, outer)


@st.composite
def kernels(draw):
  dtype = draw(st.sampled_from(["float32", "float32", "int32", "float16", "bfloat16"]))
  gen = Gen(draw, dtype)
  b = gen.b
  # the outer axes: loops, or thread indices (SPECIAL: no END closes them)
  names = draw(st.permutations(["gidx0", "gidx1", "lidx0"]))
  outer = [gen.range("LOOP") if draw(st.booleans()) else b.add("SPECIAL", b.const(draw(st.integers(0, 3)), "index"), arg={"name": names[k]})
           for k in range(draw(st.integers(0, 2)))]
  sizes = [b.nodes[b.nodes[r].src[0]].arg["value"] for r in outer]
  stmts = [gen.statement(outer, sizes) for _ in range(draw(st.integers(1, 2)))]
  body = stmts[0] if len(stmts) == 1 else b.GROUP(*stmts)
  loops = [r for r in outer if b.nodes[r].op == "RANGE"]
  b.SINK(b.END(body, *loops) if loops else body)
  seed = draw(st.integers(0, 2 ** 32 - 1))
  return gen.b.graph(), dtype, gen.outs, seed


def inputs_for(dtype, outs, seed):
  rng = np.random.default_rng(seed)
  dt = NP[dtype]
  if dtype == "int32":
    x, y = rng.integers(-4, 5, XS), rng.integers(-2 ** 31, 2 ** 31, XS)
  else:
    x = rng.choice(EXACT, XS)
    y = rng.standard_normal(XS) * 10.0 ** rng.integers(-4, 5, XS)   # any floats: rounding shows the order
  inputs = {"param1": x.astype(dt), "param2": y.astype(dt)}
  for name, shape in outs.items(): inputs[name] = rng.integers(-9, 9, shape).astype(dt)   # stores may skip elements
  return inputs


def same_bits(a, b):
  """Equal bit for bit (any NaN equals any NaN: which payload a NaN carries is not specified)."""
  a, b = np.asarray(a), np.asarray(b)
  if a.shape != b.shape: return False
  if a.dtype.kind == "f":
    nan = np.isnan(a)
    if not np.array_equal(nan, np.isnan(b)): return False
    a, b = np.where(nan, 0, a), np.where(nan, 0, b)
  return a.tobytes() == b.tobytes()


def listing(g) -> str:
  return "\n".join(f"  {i}: {n.op} {n.src} {n.arg if n.arg is not None else ''}" for i, n in enumerate(g.nodes))


def reachable(g) -> set:
  """Input names of the PARAMs the root reaches."""
  seen, stack = set(), list(g.root_indices)
  while stack:
    i = stack.pop()
    if i not in seen: seen.add(i); stack.extend(g.nodes[i].src)
  return {f"param{g.nodes[i].arg['slot']}" for i in seen if g.nodes[i].op == "PARAM"}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels())
def test_vectorized_evaluation_equals_the_sequential_loops(case):
  check(case)


def check(case):
  g, dtype, outs, seed = case
  inputs = inputs_for(dtype, outs, seed)
  used = reachable(g)
  try: got = evaluate(g, {k: v for k, v in inputs.items() if k in used})
  except Exception as e: raise AssertionError(f"refimpl failed on\n{listing(g)}") from e
  mem = Sequential(g, inputs).run()
  slot_of = {f"param{n.arg['slot']}": i for i, n in enumerate(g.nodes) if n.op == "PARAM"}
  for name in outs:
    want = mem[slot_of[name]]
    have = got.get(name, inputs[name])   # an output no store reached keeps its input
    assert same_bits(have, want), f"{name}: refimpl {have!r} != sequential {want!r}\n{listing(g)}"
