"""Tensor.__getitem__ in terms of SHRINK, PERMUTE, INDEX and RESHAPE.

Accepted per axis: an int (removes the axis), a slice (step 1: SHRINK; any other step: an
index vector), a list of ints or an integer Tensor (an index vector), None (a new size-1
axis) and one Ellipsis.

INDEX indexes the leading axes, so the indexed axes are permuted to the front, INDEXed,
and the surviving axes permuted back into their original order. Index vectors index
*outer-wise* (like NumPy's np.ix_): several of them give the product of their lengths,
each in its own axis's position. Python ints and lists are bounds-checked and wrapped
like NumPy's; the values of an index Tensor are not (out of range reads as zero,
decision index-oob).
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.frontend.nodes import const


def getitem(x, idx):
  Tensor = type(x)   # the Tensor class (tensor.py builds on this module)
  items = list(idx) if isinstance(idx, tuple) else [idx]
  ellipsis = [k for k, i in enumerate(items) if i is Ellipsis]   # identity: == on a Tensor builds a node
  if len(ellipsis) > 1: raise IndexError("at most one Ellipsis")
  real = sum(1 for i in items if i is not None and i is not Ellipsis)
  if real > x.ndim: raise IndexError(f"too many indices ({real}) for a tensor of {x.ndim} dims")
  fill = [slice(None)] * (x.ndim - real)
  if ellipsis: items[ellipsis[0]:ellipsis[0] + 1] = fill
  else: items += fill

  # one entry per source axis: ("keep",) | ("int", UOp) | ("vec", UOp, out_shape); None marks a new axis
  per_axis, new_axes, out_pos = [], [], 0
  axis = 0
  for it in items:
    if it is None:
      new_axes.append(out_pos); out_pos += 1; continue
    dim = x.shape[axis]
    if isinstance(it, bool): raise IndexError("bool indices are not supported")
    if isinstance(it, int):
      per_axis.append(("int", const(_wrap(it, dim), "index")))
    elif isinstance(it, slice):
      start, stop, step = it.indices(dim)
      if step == 1:
        per_axis.append(("slice", start, max(stop - start, 0))); out_pos += 1
      else:
        per_axis.append(("vec", _vconst(range(start, stop, step)), None)); out_pos += 1
    elif isinstance(it, (list, range)):
      per_axis.append(("vec", _vconst([_wrap(i, dim) for i in it]), None)); out_pos += 1
    elif isinstance(it, Tensor):
      if it.ndim > 1: raise IndexError("index tensors must be 0-d or 1-d (INDEX.index_shape); reshape first")
      per_axis.append(("int",) + (it.uop,) if it.ndim == 0 else ("vec", it.uop, None))
      out_pos += it.ndim
    else:
      raise IndexError(f"unsupported index {it!r}")
    axis += 1

  # slices with step 1 are SHRINKs
  if any(p[0] == "slice" for p in per_axis):
    offs = [p[1] if p[0] == "slice" else 0 for p in per_axis]
    sizes = [p[2] if p[0] == "slice" else d for p, d in zip(per_axis, x.shape)]
    if offs != [0] * x.ndim or sizes != list(x.shape): x = x.shrink_to(sizes, offset=offs)

  indexed = [a for a, p in enumerate(per_axis) if p[0] in ("int", "vec")]
  if indexed:
    rest = [a for a in range(x.ndim) if a not in indexed]
    if indexed != list(range(len(indexed))): x = x.permute(indexed + rest)
    x = Tensor(UOp("INDEX", (x.uop,) + tuple(per_axis[a][1] for a in indexed)))
    # surviving axes, by the source axis they came from; put them back in that order
    came_from = [a for a in indexed if per_axis[a][0] == "vec"] + rest
    order = sorted(range(len(came_from)), key=lambda k: came_from[k])
    if order != list(range(len(order))): x = x.permute(order)
  if new_axes:
    shape = list(x.shape)
    for p in new_axes: shape.insert(p, 1)
    x = x.reshape(shape)
  return x


def _wrap(i: int, dim: int) -> int:
  if not -dim <= i < dim: raise IndexError(f"index {i} is out of bounds for a dim of size {dim}")
  return i + dim if i < 0 else i


def _vconst(values) -> UOp:
  return UOp("VCONST", (), {"values": [int(v) for v in values], "dtype": "index"})
