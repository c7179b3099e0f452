"""Assigns at tensor level: tinygrad's `Tensor.assign` written as the spec's STORE into
storage (the map table's forms `store` and `after`, the views under `assign_views`).

tinygrad 0.14 (tensor.py `assign`) makes `AFTER(T, STORE(T, x))`; for an assign into a view
of a buffer it puts `AFTER(B, AFTER(view, STORE(view, x)))` in place of the buffer B (B may
be RESHAPE(BUFFER), or the buffer after earlier assigns). So a STORE's target T may be
  * storage seen through movement ops and earlier assigns (`cache[:, :, 3:4].assign(x)`),
    where the spec's STORE writes storage itself (rule STORE.target);
  * a tensor that is not a buffer yet (a COPY, any computed value: the RNG counter after
    `Tensor.manual_seed`), which tinygrad gives a buffer when it realizes the assign.
Both are written with the spec's own ops:
  * into a view of storage B: STORE(B, W), with B ordered after its earlier assigns
    (AFTER(B, STORE ...)) and W the whole new contents of B: x carried back through the
    inverse of each view op (`INVERSE`), and B's current contents where the view does not
    reach (a SHRINK window keeps the rest);
  * into a tensor X that is not storage: X's buffer lives only inside the realize and only
    the reads ordered through the AFTER see what was stored, so AFTER(X, STORE(X, x)) is W,
    computed the same way over X's value.
An assign through a view that has no inverse (EXPAND: several elements of the view are one
element of the buffer) keeps tinygrad's STORE, which the validator refuses (STORE.target);
the import report counts it.
"""
from __future__ import annotations
from types import GeneratorType
from tinyspec.dispatch import Registry
from tinyspec.interop.tinygrad_contexts import V, SHAPE, TARGET
from tinyspec.interop.tinygrad_map import is_invalid, mapping
from tinyspec.interop import tinygrad_calls, tinygrad_multi
from tinyspec.tables import tables

INVERSE = Registry("assign view inverse", ops=False)   # view op -> how a write through it reaches its source


def _views() -> dict: return mapping()["assign_views"]


def target_chain(dst):
  """(base, views outermost first, the deps of each AFTER on the way innermost first) of an
  assign target: the views are the map table's `assign_views` (invertible or not), AFTERs
  pass their source on (AFTER(RESHAPE(B), d) is RESHAPE(AFTER(B, d)): AFTER's semantics), and
  so does a CONTIGUOUS of an AFTER of a buffer (`is_buffer_after`)."""
  views, orders, u, names = [], [], dst, _views()
  while True:
    if u.op.name == "AFTER": orders.append(u.src[1:])
    elif u.op.name in names: views.append(u)
    elif not is_buffer_after(u): return u, views, orders[::-1]
    u = u.src[0]


def is_buffer_after(u) -> bool:
  """u is CONTIGUOUS(AFTER(T, ...)) with T a buffer (through RESHAPEs): tinygrad writes it as
  the AFTER itself (tensor.py's "remove extra CONTIGUOUS on AFTER (only when target is
  contiguous)"), so an assign into it writes the buffer (`a = zeros.contiguous(); a.assign(x)`)."""
  return u.op.name == "CONTIGUOUS" and u.src[0].op.name == "AFTER" and u.src[0].src[0].has_buffer_identity()


def is_storage(u) -> bool:
  """u is a buffer of the spec (BUFFER, PARAM: `storage: true`), not a Variable."""
  a = getattr(u.arg, "addrspace", None)
  op = (mapping()["ops"].get(u.op.name) or {}).get("op", u.op.name)
  return op in tables().storage_ops and not (a is not None and a.name == "ALU")


def stored_buffers(roots) -> dict:
  """{STORE: its buffer} for every STORE of a tensor-level graph whose target is storage
  (through views and earlier assigns): what the realize leaves in those buffers is a result
  of it too. A STORE in the body of a FUNCTION or CALL stores into its arguments: it is
  taken with the body's PARAMs replaced by them."""
  from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  out = {}
  for u in UOp.sink(*roots).toposort(enter_calls=False):
    if u.op.name == "STORE" and not stores_invalid(u) and is_storage(base := target_chain(u.src[0])[0]): out[u] = base
    elif u.op.name in ("FUNCTION", "CALL"): out.update(stored_buffers([tinygrad_calls.inlined(u)]))
  return out


def stores_invalid(u) -> bool:
  """u is a STORE of tinygrad's Invalid (Tensor.invalids, a store the program leaves
  undefined), which rangeify removes ("remove invalid writes"): it writes nothing."""
  if u.op.name != "STORE": return False
  v = u.src[1].base
  return is_invalid(v) or (v.op.name == "CONTIGUOUS" and is_invalid(v.src[0].base))


def without_invalid_stores(cv, u):
  """AFTER u without its STOREs of Invalid (rangeify drops them: the target keeps what it
  held); None where no dep is left (the AFTER is its target)."""
  deps = [d for d in u.src[1:] if not stores_invalid(d)]
  if len(deps) == len(u.src) - 1: return u
  cv.report.forms["STORE of Invalid dropped: its target as it was"] += 1
  return u.replace(src=(u.src[0], *deps)) if deps else None


def _refused(views) -> str | None:
  return next((v.op.name for v in views if v.op.name not in INVERSE), None)


def store(cv, u):
  """STORE(T, x) at tensor level: into storage through its views (see the module doc)."""
  dst = u.src[0]
  tdtype = cv.dtype_of(dst)
  val = yield u.src[1], cv.adopt(u.src[1], tdtype)
  gates = []
  for s in u.src[2:]: gates.append((yield s, V()))
  base, views, orders = target_chain(dst)
  refused = _refused(views)
  if not is_storage(base) or refused:
    why = f"a view through {refused}" if refused else f"a {base.op.name}, not storage, outside the AFTER that orders it"
    cv.report.unmapped[f"assign into {why}"] += 1
    return cv.add("STORE", [(yield dst, TARGET), val, *gates])
  target = yield base, TARGET
  bdtype = cv.dtype_of(base)   # a BITCAST view stores values of another dtype into the buffer
  for deps in orders:   # innermost first: the store stays ordered after every earlier assign
    srcs = []
    for d in deps: srcs.append((yield d, V()))
    target = cv.add("AFTER", [target, *srcs], None, cv.nodes[target].dtype, cv.nodes[target].shape)   # the storage's (a replicated BUFFER: all n copies)
  if views:
    cv.report.forms["assign into a view (" + " of ".join(v.op.name for v in views) + ")" + (" after an assign" if orders else "")] += 1
    val = yield from write_back(cv, tinygrad_multi.first_copy(cv, base, target, bdtype), views, val)
  return cv.add("STORE", [target, tinygrad_multi.onto_every_copy(cv, base, val, bdtype), *gates])


def buffer_after(cv, u, ctx):
  """CONTIGUOUS at tensor level: of an AFTER of a buffer (`is_buffer_after`), that AFTER, as
  tinygrad writes it; otherwise the plain form."""
  if not is_buffer_after(u): return (yield from cv.plain_form(u, ctx))
  cv.report.forms["CONTIGUOUS of an AFTER of a buffer: the AFTER"] += 1
  return (yield u.src[0], ctx)


def stores_into(t, deps) -> list | None:
  """The (STORE, views from its target down to t) among deps, in order: STOREs into t or a
  view of it, and those under an AFTER of a view of t (an assign into a view); None when a
  dep is anything else."""
  out = []
  for d in deps:
    if d.op.name == "STORE" and len(d.src) == 2 and (vs := views_between(d.src[0], t)) is not None: out.append((d, vs))
    elif d.op.name == "AFTER" and views_between(d.src[0], t) is not None and (inner := stores_into(t, d.src[1:])) is not None:
      out += inner
    else: return None
  return out


def views_between(dst, t) -> list | None:
  """The view ops from dst down to t (outermost first), None when dst is not a view of t."""
  vs, u, names = [], dst, _views()
  while u is not t:
    if u.op.name not in names: return None
    vs.append(u)
    u = u.src[0]
  return vs


def after(cv, u):
  """AFTER(T, deps) at tensor level whose T is not storage: T's value after the assigns
  among deps (see the module doc). None when deps hold something else: the plain form."""
  stores = stores_into(u.src[0], u.src[1:])
  if not stores or any(_refused(vs) for _, vs in stores): return None
  dtype = cv.dtype_of(u)
  cur = None   # T's value, read only where a store through a view keeps some of it
  for st, views in stores:
    val = yield st.src[1], cv.adopt(st.src[1], dtype)
    if views and cur is None: cur = yield u.src[0], V()
    cur = yield from write_back(cv, cur, views, val)
  cv.report.forms[f"assign into a {target_chain(u.src[0])[0].op.name} (not storage): the value it gets"] += 1
  return cur


def write_back(cv, cur: int, views: list, val: int):
  """The whole new contents of `cur` (a node: storage, or a tensor's value) after val is
  written through views (outermost first: views[-1] is applied to cur itself)."""
  if not views: return val
  v, inner = views[-1], views[:-1]
  keeps = any(_views()[w.op.name].get("keeps") for w in inner)
  sub = (yield from forward(cv, v, cur)) if keeps else None   # what the inner views see of cur
  new = yield from write_back(cv, sub, inner, val)
  made = INVERSE[v.op.name](cv, v, new, cur)   # a node, or a generator that converts v's shape operands first
  return (yield from made) if isinstance(made, GeneratorType) else made


def forward(cv, v, cur: int):
  """The view op v applied to node cur (its shape operands and arg converted as v's)."""
  dtype = cv.dtype_of(v)
  srcs = [cur]
  for s in v.src[1:]: srcs.append((yield s, SHAPE))
  return cv.add(cv.op_name(v), srcs, cv.arg_of(v, dtype), *cv.declared(v, dtype))


def _like_source(cv, v):
  return cv.declared(v.src[0], cv.dtype_of(v))


@INVERSE.register("RESHAPE")
def _reshape(cv, v, new, cur):
  return cv.add("RESHAPE", (new, (yield from cv.dims_operand(v.src[0].shape))), None, *_like_source(cv, v))


@INVERSE.register("PERMUTE")
def _permute(cv, v, new, cur):
  return cv.add("PERMUTE", (new,), [list(v.arg).index(k) for k in range(len(v.arg))], *_like_source(cv, v))


@INVERSE.register("FLIP")
def _flip(cv, v, new, cur):
  return cv.add("FLIP", (new,), list(v.arg), *_like_source(cv, v))


@INVERSE.register("DETACH")
def _detach(cv, v, new, cur):
  return new


@INVERSE.register("BITCAST")
def _bitcast(cv, v, new, cur):
  """The same bytes in the source's dtype (the spec's BITCAST rescales the last axis back)."""
  dtype = cv.dtype_of(v.src[0])
  return cv.add("BITCAST", (new,), dtype, *cv.declared(v.src[0], dtype))


@INVERSE.register("PAD")
def _pad(cv, v, new, cur):
  """What lands in the padding has no storage: SHRINK back to the source."""
  off = yield v.src[1], SHAPE
  return cv.add("SHRINK", (new, off, (yield from cv.dims_operand(v.src[0].shape))), None, *_like_source(cv, v))


@INVERSE.register("SHRINK")
def _shrink(cv, v, new, cur):
  """PAD the window back to the source's shape; WHERE the window's mask (a PAD of true),
  else the source's current contents."""
  off = yield v.src[1], SHAPE
  dtype, full, window = cv.dtype_of(v), tuple(v.src[0].shape), tuple(v.shape)   # dims may be symbolic (a bound Variable)
  padded = cv.add("PAD", (new, off, (yield from cv.dims_operand(full))), None, *_like_source(cv, v))
  true = cv.add("CONST", (), {"value": True, "dtype": "bool"}, *cv.declared_as("bool", ()))
  ones = cv.add("RESHAPE", (true, cv.vshape((1,) * len(window))), None, *cv.declared_as("bool", (1,) * len(window)))
  ones = cv.add("EXPAND", (ones, (yield from cv.dims_operand(window))), None, *_declared_as(cv, "bool", window))
  mask = cv.add("PAD", (ones, off, (yield from cv.dims_operand(full))), None, *_declared_as(cv, "bool", full))
  return cv.add("WHERE", (mask, padded, cur), None, *_declared_as(cv, dtype, full))


def _declared_as(cv, dtype, dims):
  """What to declare on a node of dims: no shape where a dim is symbolic (the validator derives it)."""
  return cv.declared_as(dtype, dims) if all(isinstance(d, int) for d in dims) else (dtype, None)
