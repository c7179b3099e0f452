"""tinygrad's multi-device tensors at tensor level (the map table's form `unshard`), written
with the spec's n-tuple devices.

tinygrad 0.14 writes a tensor sharded over n devices as UNSHARD(X, r) with arg (a,): r is a
RANGE of AxisType DEVICE over 0..n-1 and X the value one device holds, written with r (its
shard of a copy: SHRINK(COPY(Y, devices), r*s, s) along a), and the UNSHARD is the whole
tensor, the n shards joined along axis a (uop/ops.py: UNSHARD's shape multiplies axis a by
n; "UNSHARD ends the DEVICE range"). A BUFFER on a tuple of devices inside X is the storage
of one shard on each device (its shape is one shard's).

The spec's n-tuple device (spec/ops.yaml, the Dialect document's collectives) holds the
whole tensor, split along axis 0: a BUFFER on n devices has the full shape. So
  * a BUFFER of tinygrad's on n devices imports at n times its size: shard d is
    SHRINK(B, d*size, size) of it (its shards one after another, as the devices hold them);
    outside an UNSHARD every device holds all of it (replicated): read, the first copy;
  * UNSHARD(X, r) is X with r := d, for each device d (`per_device`), the n values joined
    along axis a: STACK (a new leading axis of the devices), PERMUTE it next to a, RESHAPE
    the two into one. No arithmetic: the values are tinygrad's shards, bit for bit. Values
    on n different devices (an MSTACK of one buffer per device) are each COPYed onto the n
    devices first (the broadcast, `copy`): a STACK joins values of one device.
An UNSHARD over several axes (a kernel tile's shards, not a tensor's) is left unmapped.
"""
from __future__ import annotations
from tinyspec.interop.tinygrad_contexts import TARGET


def unshard(cv, u, ctx):
  """UNSHARD(X, r) with arg (a,): the per-device values of X joined along a."""
  if cv.level != "tensor" or len(u.arg) != 1 or len(u.src) != 2 or not _is_device_range(u.src[1]):
    return (yield from cv.unmapped_form(u, ctx))
  a, r = int(u.arg[0]), u.src[1]
  n, dtype = int(r.vmax) + 1, cv.dtype_of(u, ctx)
  cv.report.forms["UNSHARD as the devices' shards joined"] += 1
  held = [per_device(cv, u.src[0], r, d) for d in range(n)]
  if len({_device_of(x) for x in held}) > 1:   # each on its own device (an MSTACK): onto all n first, to be joined
    from tinygrad.uop.ops import Ops, UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
    held = [UOp(Ops.COPY, x.dtype, (x,), arg=u.device) for x in held]
  pieces = []
  for x in held: pieces.append((yield x, ctx))
  shard = cv.shape_of(u.src[0])
  stacked = cv.add("STACK", pieces, None, *cv.declared_as(dtype, None if shard is None else (n, *shard)))
  if a:
    perm = [*range(1, a + 1), 0, *range(a + 1, len(shard) + 1)]
    stacked = cv.add("PERMUTE", (stacked,), perm, *cv.declared_as(dtype, None if shard is None else [((n, *shard))[p] for p in perm]))
  return cv.add("RESHAPE", (stacked, (yield from cv.dims_operand(u.shape))), None, *cv.declared(u, dtype))


def copy(cv, u, ctx):
  """COPY(x, devices) of a tuple of devices: every device gets all of x (tinygrad shards it
  afterwards, by SHRINKs of the device's range), which is the Dialect document's broadcast:
  RESHAPE(x, (1,)+s), EXPAND to (n,)+s, COPY to the devices (the n copies split along axis 0,
  one each), REPLICATED([0]) (they agree), RESHAPE back to s. To one device: the plain form."""
  if cv.level != "tensor" or not isinstance(u.arg, tuple) or cv.shape_of(u) is None:
    return (yield from cv.plain_form(u, ctx))
  cv.report.forms["COPY to a tuple of devices as the broadcast"] += 1
  dtype, shape, n = cv.dtype_of(u, ctx), cv.shape_of(u), len(u.arg)
  x = yield u.src[0], cv.adopt(u.src[0], dtype)
  x = cv.add("RESHAPE", (x, cv.vshape((1, *shape))), None, *cv.declared_as(dtype, (1, *shape)))
  x = cv.add("EXPAND", (x, cv.vshape((n, *shape))), None, *cv.declared_as(dtype, (n, *shape)))
  x = cv.add("COPY", (x,), cv.arg_of(u, dtype), *cv.declared_as(dtype, (n, *shape)))
  x = cv.add("REPLICATED", (x,), [0], *cv.declared_as(dtype, (1, *shape)))
  return cv.add("RESHAPE", (x, cv.vshape(shape)), None, *cv.declared(u, dtype))


def per_device(cv, x, r, d: int):
  """X as device d holds it: the DEVICE range r replaced by d, each BUFFER on a tuple of
  devices by its shard d (SHRINK of the whole buffer), an MSTACK (one value per device) by
  its source d. An inner UNSHARD ends its own range: it is a whole tensor, kept as it is."""
  from tinygrad.dtype import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.uop.ops import Ops, UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  new = {}
  for v in x.toposort():
    if v is r: new[v] = UOp.const(d, r.dtype)
    elif v.op is Ops.UNSHARD: new[v] = v
    elif v.op is Ops.MSTACK and len(v.src) > d: new[v] = new[v.src[d]]   # the devices' values, one source each
    elif (w := whole_buffer(cv, v)) is not None:
      size = int(v.src[0].arg)
      new[v] = w.shrink(((d * size, (d + 1) * size),))
    elif not v.src: new[v] = v
    else:
      nv = v.replace(src=tuple(new[s] for s in v.src))
      new[v] = nv.simplify() if nv.dtype == dtypes.weakint else nv   # a shard's offset, d*s, folds to a constant
  return new[x]


def replicated(cv, u, whole, ctx):
  """A BUFFER on n devices outside an UNSHARD: each device holds all of it (a replicated
  tensor, tinygrad's axis None; tinygrad writes every copy). As a store target, the whole
  storage (its n copies); as a value, the first device's copy: SHRINK(B, 0, size), a view
  of storage, so that a read ordered after an assign (AFTER) sees what was stored."""
  cv.report.forms["BUFFER on n devices at the size of its n shards"] += 1
  b = yield whole, ctx
  if ctx == TARGET: return b
  cv.report.forms["BUFFER on n devices outside an UNSHARD as replicated"] += 1
  dtype, size = cv.dtype_of(u, ctx), int(u.src[0].arg)
  return cv.add("SHRINK", (b, cv.vshape((0,)), cv.vshape((size,))), None, *cv.declared(u, dtype))


def _replicated(cv, base) -> bool:
  """base is a BUFFER on n devices outside an UNSHARD (each device holds all of it)."""
  return cv.level == "tensor" and base.op.name == "BUFFER" and isinstance(getattr(base.arg, "device", None), tuple) and base not in cv.whole_buffers


def first_copy(cv, base, node: int, dtype: str) -> int:
  """The storage node of base read as a value: of a replicated BUFFER on n devices, the first
  device's copy SHRINK(node, 0, size) (what an assign through a view keeps where it does not
  write); of any other storage, node."""
  if not _replicated(cv, base): return node
  size = int(base.src[0].arg)
  return cv.add("SHRINK", (node, cv.vshape((0,)), cv.vshape((size,))), None, *cv.declared_as(dtype, (size,)))


def onto_every_copy(cv, base, val: int, dtype: str) -> int:
  """The value stored into base: into a replicated BUFFER on n devices (outside an UNSHARD)
  every device's copy gets it, RESHAPE(EXPAND(RESHAPE(val, (1, size)), (n, size)), (n*size,));
  into any other storage, val."""
  if not _replicated(cv, base): return val
  cv.report.forms["assign into a replicated BUFFER: every device's copy"] += 1
  n, size = len(base.arg.device), int(base.src[0].arg)
  x = cv.add("RESHAPE", (val, cv.vshape((1, size))), None, *cv.declared_as(dtype, (1, size)))
  x = cv.add("EXPAND", (x, cv.vshape((n, size))), None, *cv.declared_as(dtype, (n, size)))
  return cv.add("RESHAPE", (x, cv.vshape((n * size,))), None, *cv.declared_as(dtype, (n * size,)))


def whole_buffer(cv, u):
  """For tinygrad's BUFFER on a tuple of devices (one shard's size): the same BUFFER at the
  size of its n shards, which the spec's BUFFER on n devices is. None for any other UOp and
  for a whole buffer made here (cv.whole_buffers)."""
  from tinygrad.dtype import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  dev = getattr(u.arg, "device", None)
  if u.op.name != "BUFFER" or not isinstance(dev, tuple) or u in cv.whole_buffers: return None
  if len(u.src) != 1 or u.src[0].op.name != "CONST": return None
  w = u.replace(src=(UOp.const(int(u.src[0].arg) * len(dev), dtypes.weakint),))
  cv.whole_buffers.add(w)
  return w


def device_number(cv, rng) -> int | None:
  """In a kernel of a multi-device call, which tinygrad runs once per device (one graph per
  device here): the DEVICE range rng is that device's number among the call's devices."""
  if cv.devices is None or cv.device not in cv.devices: return None
  cv.report.forms["DEVICE range of one device's kernel as its number"] += 1
  return cv.devices.index(cv.device)


def _device_of(u):
  try: return u.device
  except Exception: return None   # noqa: BLE001 (tinygrad cannot say: taken as one more device)


def _is_device_range(r) -> bool:
  return r.op.name == "RANGE" and r.arg[-1].name == "DEVICE"
