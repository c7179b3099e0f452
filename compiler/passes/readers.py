"""Reading a tensor at an index tuple: each op's reader turns it into kernel-level scalar
code (rangeify's KernelBuilder drives them). Movement ops become index arithmetic,
simplified by compiler/analysis/symbolic: PERMUTE reorders, FLIP reflects, RESHAPE
flattens and splits, EXPAND pins broadcast axes to 0, SHRINK shifts, PAD shifts and masks
(`WHERE(valid, x, 0)`: decision pad-fill), INDEX reads its index operands and masks
out-of-range ones (decision index-oob), STACK selects, REDUCE opens RANGEs of type REDUCE.

Each reader is a generator: it yields (source, index) for the values it needs and
returns the kernel-level scalar. KernelBuilder.value drives them with an explicit stack.
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.tables import tables
from tinyspec.dtypes import dtype as _dt
from tinyspec.dispatch import Registry
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.analysis.symbolic import simplify, build_sum
from tinyspec.compiler.rendertables import policy, is_alu

READERS = Registry("tensor reader")
ZERO = const(0, "index")
TRUE = const(True, "bool")


def numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


def dims(u: UOp) -> tuple:
  v = props(u).value
  return v if isinstance(v, tuple) else (v,)


def zero_of(dtype: str) -> UOp: return const(False if _dt(dtype).cls == "bool" else 0, dtype)


_SIMP: dict = {}


def sym(u: UOp) -> UOp:
  """Simplified index/bool expression (cached: the same expression is built often)."""
  r = _SIMP.get(u)
  if r is None:
    r = simplify(u)
    if len(_SIMP) > 200_000: _SIMP.clear()
    _SIMP[u] = r
  return r


def and_(a: UOp, b: UOp) -> UOp:
  if a is TRUE: return b
  if b is TRUE: return a
  return sym(UOp("AND", (a, b)))


def in_range(v: UOp, n: int) -> UOp:
  """0 <= v < n, simplified (true when the interval proves it)."""
  lo = sym(UOp("CMPNE", (UOp("CMPLT", (v, const(0, props(v).dtype))), TRUE)))
  return and_(lo, sym(UOp("CMPLT", (v, const(n, props(v).dtype)))))


def as_index(v: UOp) -> UOp:
  return v if props(v).dtype == "index" else sym(UOp("CAST", (v,), "index"))


def bcast(sshape: tuple, oshape: tuple, idx: tuple) -> tuple:
  """The index into a source of shape sshape broadcast to oshape (right-aligned)."""
  off = len(oshape) - len(sshape)
  return tuple(ZERO if d == 1 else idx[off + j] for j, d in enumerate(sshape))


def _alu(b, x, idx):
  shape = props(x).shape
  vals = []
  for s in x.src:
    vals.append((yield s, bcast(props(s).shape, shape, idx)))
  return UOp(x.op, tuple(vals), x.arg)


@READERS.register("COPY", "AFTER", category="marker")   # the data itself
def _same(b, x, idx):
  return (yield x.src[0], idx)


@READERS.register("BITCAST")
def _bitcast(b, x, idx):
  """BITCAST; to another itemsize (decision bitcast-size) the last axis's bytes are
  regrouped little-endian with shifts on unsigned integers, as tinygrad's expand_bitcast
  does: k = t/s source elements joined (the first lowest), or one split into s/t."""
  src = x.src[0]
  s, t = _dt(props(src).dtype).itemsize, _dt(x.arg).itemsize
  if s == t: return UOp("BITCAST", ((yield src, idx),), x.arg)
  us, ut = f"uint{8 * s}", f"uint{8 * t}"
  *head, last = idx
  if t > s:
    r, acc = t // s, None
    for m in range(r):
      v = yield src, (*head, sym(UOp("ADD", (UOp("MUL", (last, const(r, "index"))), const(m, "index")))))
      part = UOp("CAST", (UOp("BITCAST", (v,), us),), ut)
      if m: part = UOp("SHL", (part, const(8 * s * m, ut)))
      acc = part if acc is None else UOp("OR", (acc, part))
    return UOp("BITCAST", (acc,), x.arg)
  r = s // t
  v = yield src, (*head, sym(UOp("IDIV", (last, const(r, "index")))))
  amount = UOp("CAST", (sym(UOp("MUL", (UOp("MOD", (last, const(r, "index"))), const(8 * t, "index")))),), us)
  return UOp("BITCAST", (UOp("CAST", (UOp("SHR", (UOp("BITCAST", (v,), us), amount)),), ut),), x.arg)


@READERS.register("PERMUTE")
def _permute(b, x, idx):
  perm = list(x.arg)
  return (yield x.src[0], tuple(idx[perm.index(j)] for j in range(len(perm))))


@READERS.register("FLIP")
def _flip(b, x, idx):
  shape = props(x).shape
  return (yield x.src[0], tuple(sym(UOp("ADD", (UOp("MUL", (i, const(-1, "index"))), const(d - 1, "index")))) if f else i
                                for i, f, d in zip(idx, x.arg, shape)))


@READERS.register("RESHAPE")
def _reshape(b, x, idx):
  src = x.src[0]
  sshape, oshape = props(src).shape, props(x).shape
  if [d for d in sshape if d != 1] == [d for d in oshape if d != 1]:
    # only size-1 axes come or go: the other axes keep their indices (no flattening,
    # so no division to undo)
    kept = iter(i for i, d in zip(idx, oshape) if d != 1)
    return (yield src, tuple(ZERO if d == 1 else next(kept) for d in sshape))
  terms: dict = {}
  stride, c = 1, 0
  for i, d in reversed(list(zip(idx, oshape))):
    if i.op == "CONST": c += int(i.arg["value"]) * stride
    else: terms[i] = terms.get(i, 0) + stride
    stride *= d
  flat = build_sum(terms, c, ZERO)
  sidx, stride = [], numel(sshape)
  for j, d in enumerate(sshape):
    stride //= max(d, 1)
    if d == 1: sidx.append(ZERO); continue
    e = flat if stride == 1 else UOp("IDIV", (flat, const(stride, "index")))
    if j > 0: e = UOp("MOD", (e, const(d, "index")))
    sidx.append(sym(e))
  return (yield src, tuple(sidx))


@READERS.register("EXPAND")
def _broadcast(b, x, idx):
  return (yield x.src[0], bcast(props(x.src[0]).shape, props(x).shape, idx))


@READERS.register("SHRINK")
def _shrink(b, x, idx):
  return (yield x.src[0], tuple(sym(UOp("ADD", (i, const(o, "index")))) for i, o in zip(idx, dims(x.src[1]))))


@READERS.register("PAD")
def _pad(b, x, idx):
  src = x.src[0]
  valid = TRUE
  sidx = []
  for i, o, d in zip(idx, dims(x.src[1]), props(src).shape):
    sidx.append(sym(UOp("ADD", (i, const(-o, "index")))))
    valid = and_(valid, in_range(sidx[-1], d))
  v = yield src, tuple(sidx)
  return v if valid is TRUE else UOp("WHERE", (valid, v, zero_of(props(x).dtype)))


@READERS.register("INDEX")
def _index(b, x, idx):
  src = x.src[0]
  tshape = props(src).shape
  valid, sidx, pos = TRUE, [], 0
  for j, i in enumerate(x.src[1:]):
    if props(i).shape == (): v = yield i, ()
    else:
      v = yield i, (idx[pos],)
      pos += 1
    v = as_index(v)
    sidx.append(v)
    valid = and_(valid, in_range(v, tshape[j]))
  v = yield src, tuple(sidx) + tuple(idx[pos:])
  return v if valid is TRUE else UOp("WHERE", (valid, v, zero_of(props(x).dtype)))


@READERS.register("STACK")
def _stack(b, x, idx):
  first, rest = idx[0], idx[1:]
  vals = []
  for s in x.src: vals.append((yield s, rest))
  out = vals[-1]
  for j in range(len(vals) - 2, -1, -1):
    sel = sym(UOp("CMPNE", (first, const(j, "index"))))      # "not source j"
    if sel.op == "CONST": out = out if sel.arg["value"] else vals[j]   # decided by the interval
    else: out = UOp("WHERE", (sel, out, vals[j]))
  return out


@READERS.register("REDUCE")
def _reduce(b, x, idx):
  src = x.src[0]
  if len(x.src) > 1: raise CompileError("compile.form", "a REDUCE over RANGEs in a tensor graph", x)
  shape = props(src).shape
  sidx, ranges = list(idx), []
  for a in x.arg.get("axes", ()):
    if shape[a] == 1: sidx[a] = ZERO; continue
    r = b.new_range(shape[a], "REDUCE")
    sidx[a] = r
    ranges.append(r)
  v = yield src, tuple(sidx)
  if ranges: return UOp("REDUCE", (v, *ranges), {"op": x.arg["op"]})
  # one element (no axes, or axes of size 1) is itself, decision reduce-one (an ADD from the
  # identity 0 would turn -0.0 into +0.0, a MAX from -inf a NaN into -inf)
  return v


def identity(op: str, dtype: str) -> UOp:
  """The identity of reduce op `op` in `dtype` (ops.yaml reduce_ops, decision reduce-empty) as a CONST."""
  return const(tables().reduce_identity(op, dtype), dtype)


def fold(op: str) -> str:
  """The binary op that combines two partial results of reduce op `op` (ops.yaml reduce_ops)."""
  return tables().reduce_fold(op)


def with_identity(op: str, v: UOp) -> UOp:
  """The combination v of two or more elements folded into the identity, where that can
  change the bits: a float identity of zero turns a -0.0 sum into +0.0 (0 + -0.0 is +0.0),
  as the reference's fold from the identity gives (one element is itself: decision reduce-one)."""
  dt = props(v).dtype
  ident = tables().reduce_identity(op, dt)
  return UOp(fold(op), (v, const(ident, dt))) if _dt(dt).cls == "float" and ident == 0 else v


@READERS.register("REPLICATED")
def _replicated(b, x, idx):
  axes = set(x.arg)
  return (yield x.src[0], tuple(ZERO if k in axes else i for k, i in enumerate(idx)))


@READERS.register("LOAD")
def _load(b, x, idx):
  if len(x.src) < 3: return (yield x.src[0], idx)
  gate = yield x.src[2], ()
  alt = yield x.src[1], idx
  v = yield x.src[0], idx
  return UOp("WHERE", (gate, v, alt))




def reader(op: str):
  """The reader of op: its own, else the elementwise or the pass-through one (None: not readable)."""
  r = READERS.get(op)
  if r is not None: return r
  if is_alu(op): return _alu
  if op in policy("transparent"): return _same
  return None
