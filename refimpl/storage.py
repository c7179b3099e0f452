"""Mutable storage as immutable versions, and the gather/scatter both levels share.

Storage (a BUFFER, a PARAM, a kernel's REG/LOCAL buffer) never changes in place. A STORE
makes a new Version: its parent plus one Write. A reader sees the version its storage
expression is ordered after (through AFTER); so a read that is not ordered after a store
sees the contents before it, and two unordered stores are both seen, applied in file
order, by a reader ordered after both.

Kernel values carry one leading array axis per loop axis (RANGE or SPECIAL) of the
kernel, of size 1 where the value does not depend on that loop. Storage state can vary
over loops too (a register is per thread): `materialize(version, keep)` gives the state
as seen at points of the loop axes in the bitmask `keep` -- per point along `keep`,
and with every iteration of the other loops applied in iteration order (last write wins).
"""
from __future__ import annotations
import itertools
import weakref
import numpy as np
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.numeric import EXTENDED_FLOATS, broadcast_shape

_seq = itertools.count(1)


class Write:
  """One STORE (or ATOMICADD) at every point of its loops: `path` leads from the storage
  root to the target ((kind, data) steps: ("index", [index arrays]) or
  ("view", (byte offset, size, np dtype))); `value` and `gate` are loop-prefixed arrays."""
  __slots__ = ("node", "path", "value", "gate", "mode")

  def __init__(self, node, path, value, gate=None, mode="set"):
    self.node, self.path, self.value, self.gate, self.mode = node, path, value, gate, mode


class Version:
  """A state of one storage: `parent` + `write`, or the initial contents (parent None).
  Materialized arrays are cached weakly: whoever still holds one (a node's value) keeps
  it; otherwise it is rebuilt from the nearest ancestor that is still cached."""
  __slots__ = ("storage", "parent", "write", "seq", "cache", "strong", "__weakref__")

  def __init__(self, storage, parent=None, write=None):
    self.storage, self.parent, self.write = storage, parent, write
    self.seq = next(_seq)
    self.cache: dict = {}
    self.strong = None

  def cached(self, keep):
    ref = self.cache.get(keep)
    return None if ref is None else ref()

  def remember(self, keep, a):
    try: self.cache[keep] = weakref.ref(a)
    except TypeError: pass


class Storage:
  """A buffer's identity: its key (input name or a local key), dtype, shape, addrspace,
  and initial contents (an array of the buffer's shape, without loop axes)."""
  __slots__ = ("key", "name", "dtype", "shape", "addrspace", "initial", "base", "output", "missing", "merged")

  def __init__(self, key, name, dtype, shape, addrspace, initial, output=True):
    self.key, self.name, self.dtype, self.shape, self.addrspace = key, name, dtype, tuple(shape), addrspace
    self.initial, self.output = initial, output
    self.missing = None   # the EvalError to raise when the initial contents are read (no input given, no zeros asked for)
    self.base = Version(self)
    self.merged: dict = {}   # (seq, seq) -> the version merge() made of those two: the same histories meet as one version


# ------------------------------------------------------------------ versions
def is_ancestor(a: Version, b: Version) -> bool:
  """a is b or an ancestor of b."""
  while b is not None and b.seq >= a.seq:
    if b is a: return True
    b = b.parent
  return False


def merge(a: Version, b: Version) -> Version:
  """The version a reader ordered after both a and b sees. Two unordered versions merge into
  one new version, made once per evaluation (the storage keeps it: a LINEAR meets the same
  pair again, and later merges then see it as an ancestor). It holds no array of its own,
  only the writes the two histories already hold."""
  if a is b or is_ancestor(b, a): return a
  if is_ancestor(a, b): return b
  memo = a.storage.merged
  got = memo.get((a.seq, b.seq))
  if got is None: got = memo[(a.seq, b.seq)] = _merge_unordered(a, b)
  return got


def _merge_unordered(a: Version, b: Version) -> Version:
  # unordered stores: both apply, in file order, on their common ancestor
  side_a, side_b, base = _sides(a, b)
  if base is None or any(v.strong is not None for v in side_a + side_b):
    raise EvalError(f"two unordered histories of storage {a.storage.name} meet (nodes {a.write and a.write.node} and "
                    f"{b.write and b.write.node}); the reference cannot order them", rule="eval.unsupported")
  writes = [v.write for v in side_a + side_b if v.write is not None]
  writes = sorted({id(w): w for w in writes}.values(), key=lambda w: w.node)
  v = base
  for w in writes: v = Version(base.storage, v, w)
  return v


def _sides(a: Version, b: Version) -> tuple[list, list, Version | None]:
  """(a's versions above the nearest common ancestor, b's, that ancestor or None). A parent
  is older than its child (smaller seq), so stepping back the newer side meets the ancestor
  without walking either whole history (a register's runs thousands of stores long)."""
  side_a, side_b = [], []
  while a is not b:
    if a is None or b is None: return side_a, side_b, None
    if a.seq > b.seq: side_a.append(a); a = a.parent
    else: side_b.append(b); b = b.parent
  return side_a, side_b, a


def merge_effects(effs):
  """Merge several {storage key: Version} maps (None entries ignored); shares an input
  map when it already holds everything."""
  out = None
  for e in effs:
    if not e or e is out: continue
    if out is None: out = e; continue
    merged = None
    for k, v in e.items():
      cur = out.get(k) if merged is None else merged.get(k)
      if cur is v: continue
      nv = v if cur is None else merge(cur, v)
      if nv is cur: continue
      if merged is None: merged = dict(out)
      merged[k] = nv
    if merged is not None: out = merged
  return out


# ------------------------------------------------------------------ materialize
def materialize(v: Version, keep: int, loop_sizes: tuple, R: int) -> np.ndarray:
  """The contents of version v as an array of shape (P..., *buffer shape), P having the
  loop size for the axes in `keep` and 1 elsewhere. Read-only."""
  keep &= _varying(v, R)   # per point only along loops some write actually varies over
  got = v.cached(keep)
  if got is not None: return got
  chain, cur, base = [], v, None
  while True:
    if cur.write is None or cur.strong is not None:   # the initial contents, or a snapshot in a sequential loop
      if cur.write is None and not chain and v.storage.missing is not None: raise v.storage.missing
      base = _start(cur, keep, R)
      break
    got = cur.cached(keep)
    if got is not None: base = got; break
    chain.append(cur); cur = cur.parent
  st = v.storage
  P = tuple(n if keep >> d & 1 else 1 for d, n in enumerate(loop_sizes))
  if not chain:
    out = np.broadcast_to(base, P + st.shape) if base.shape[:R] != P else base
    v.remember(keep, out)
    return out
  if all(n == 1 for n in P) and covers_all(chain[-1].write, st.shape):   # the first write leaves nothing of base
    state = unfilled(P + st.shape, base.dtype)
  else: state = np.array(np.broadcast_to(base, P + st.shape))   # a private, contiguous copy
  for ver in reversed(chain): apply_write(state, ver.write, keep, loop_sizes, R)
  state.flags.writeable = False
  v.remember(keep, state)
  return state


def _varying(v: Version, R: int) -> int:
  """Loop axes (bitmask) along which the writes of v's chain (or its snapshot) vary."""
  mask = 0
  while v is not None:
    if v.strong is not None: mask |= v.strong[1]; break
    if v.write is None: break
    w = v.write
    arrays = [w.value] + ([w.gate] if w.gate is not None else []) + [a for kind, data in w.path if kind == "index" for a in data]
    for kind, data in w.path:
      if kind == "affine": mask |= sum(1 << d for d in data[0].coefs if data[1][d] > 1)
    for a in arrays:
      for d in range(min(R, np.ndim(a))):
        if a.shape[d] > 1: mask |= 1 << d
    v = v.parent
  return mask


def _start(v: Version, keep: int, R: int) -> np.ndarray:
  if v.strong is None:
    return v.storage.initial.reshape((1,) * R + v.storage.shape)
  arr, mask = v.strong
  if mask & ~keep:
    raise EvalError(f"storage {v.storage.name} is read at a different loop nesting than the sequential loop that carries it", rule="eval.unsupported")
  return arr


def snapshot(storage: Storage, arr: np.ndarray, mask: int, since: Version) -> Version:
  """A version whose contents are given (per point along the loop axes in `mask`): the
  state inside a sequential loop. `since` (the version before the loop, which the contents
  include) is its parent for ordering; reading never goes past the snapshot."""
  v = Version(storage, since)
  v.strong = (arr, mask)
  return v


# ------------------------------------------------------------------ gather (reads)
def layout(idxs: list, R: int) -> list:
  """Index arrays reshaped for outer indexing with loop axes: index j's own dims go to
  their place among all the indices' dims, after the R loop axes."""
  kdims = [a.ndim - R for a in idxs]
  nI, off, out = sum(kdims), 0, []
  for a, k in zip(idxs, kdims):
    out.append(a.reshape(a.shape[:R] + (1,) * off + a.shape[R:] + (1,) * (nI - off - k)))
    off += k
  return out


def gather(T: np.ndarray, idxs: list, R: int):
  """Outer indexing from the left with loop-prefixed arrays: T is (L..., S...), each index
  is (L_j..., I_j) with I_j () or (k,). Returns (values of shape (L'..., I_1.., I_n..,
  S[n:]...), valid mask of shape (L'..., I...) or None when every index is in range).
  Out-of-range positions read T's element 0 (the caller zeroes or refuses them)."""
  S = T.shape[R:]
  idxs = layout(idxs, R)
  nI = idxs[0].ndim - R if idxs else 0
  index, valid = [], None
  if any(S[j] == 0 for j in range(len(idxs))):
    # an indexed axis of size 0: every index is out of range, but NumPy cannot even read
    # element 0 of it, so read from a stand-in of size 1 there (the caller zeroes it all)
    T = np.zeros(T.shape[:R] + tuple(1 if (j < len(idxs) and d == 0) else d for j, d in enumerate(S)), T.dtype)
  if idxs and all(n == 1 for a in idxs for n in a.shape[:R]):   # indices the same at every point: index the own dims alone
    return _gather_own(T, idxs, S, R, nI)
  same = all(n == 1 for n in T.shape[:R])   # the same contents at every point (an input): index them alone
  for d in range(R if not same else 0):
    n = T.shape[d]
    shp = (1,) * d + (n,) + (1,) * (R - d - 1 + nI)
    index.append(np.zeros(shp, np.intp) if n == 1 else np.arange(n).reshape(shp))
  for j, a in enumerate(idxs):
    if out_of_range(a, S[j]):   # S: the real dims, so a size-0 axis marks every index invalid
      ok = (a >= 0) & (a < S[j])
      a = np.where(ok, a, np.zeros((), a.dtype))
      valid = ok if valid is None else valid & ok
    index.append(a)
  if not same: return T[tuple(index)], valid
  own = T.reshape(T.shape[R:])
  out = np.take(own, index[0], axis=0) if len(index) == 1 else own[tuple(index)] if index else T   # take: NumPy's faster gather
  if index and out.ndim < R: out = out.reshape((1,) * (R - out.ndim) + out.shape)
  return out, valid


def out_of_range(a: np.ndarray, n: int) -> bool:
  """Whether some index of a lies outside 0 .. n-1 (two reductions, no mask unless one does)."""
  return a.size > 0 and (n == 0 or bool(a.min() < 0) or bool(a.max() >= n))


def _gather_own(T: np.ndarray, idxs: list, S: tuple, R: int, nI: int):
  """gather() with indices that do not vary over the loops: outer indexing of T's own
  dims, its loop dims kept (a view where the indices are scalars)."""
  index, valid = [], None
  for j, a in enumerate(idxs):
    a = a.reshape(a.shape[R:])
    if out_of_range(a, S[j]):
      ok = (a >= 0) & (a < S[j])
      a = np.where(ok, a, np.zeros((), a.dtype))
      valid = ok if valid is None else valid & ok
    index.append(int(a) if a.ndim == 0 else a.reshape(a.shape + (1,) * 0))
  out = T[(slice(None),) * R + tuple(index)]
  return out, (None if valid is None else valid.reshape((1,) * R + valid.shape))


def zero_invalid(x: np.ndarray, valid):
  """Set the elements read through an out-of-range index to zero (decision pad-fill)."""
  if valid is None: return x
  extra = x.ndim - valid.ndim
  v = valid.reshape(valid.shape + (1,) * extra)
  return np.where(v, x, np.zeros((), x.dtype))


# ------------------------------------------------------------------ scatter (writes)
def resolve_target(state: np.ndarray, path: list, R: int):
  """The region a path points into: (flat writable (P..., n) view, per-point shape, the
  index steps to apply to it)."""
  region = state
  steps = []
  for kind, data in path:
    if kind == "view":
      off, size, dt = data
      flat = flatten_after(region, R)
      b = flat.view(np.uint8) if flat.dtype.itemsize != 1 or flat.dtype != np.uint8 else flat
      region = b[..., off:off + size * dt.itemsize].view(dt)
      steps = []
    else:
      steps.append(data)
  shape = region.shape[R:]
  return flatten_after(region, R), shape, steps


def flatten_after(a: np.ndarray, R: int) -> np.ndarray:
  """(P..., S...) as (P..., prod(S)); spelled out, since -1 is ambiguous when a is empty."""
  n = 1
  for d in a.shape[R:]: n *= d
  return a.reshape(a.shape[:R] + (n,))


def target_positions(shape, steps, R: int):
  """Element positions (in the flattened per-point buffer) the index steps select, as a
  loop-prefixed array, and their validity mask (None when all are in range). Positions
  read through an out-of-range index become -1, so later steps keep them invalid."""
  if len(steps) == 1:   # one INDEX: the position is arithmetic
    return _index_positions(shape, layout(steps[0], R), R)
  n = 1
  for d in shape: n *= d
  ids = np.arange(n, dtype=np.intp).reshape((1,) * R + tuple(shape))
  any_bad = False
  for idxs in steps:
    ids, ok = gather(ids, idxs, R)
    if ok is not None:
      ids = np.where(ok.reshape(ok.shape + (1,) * (ids.ndim - ok.ndim)), ids, -1)
      any_bad = True
  return ids, ((ids >= 0) if any_bad else None)


def _index_positions(shape, idxs, R: int):
  """target_positions for one INDEX (indices laid out for outer indexing): row-major arithmetic."""
  rest = tuple(shape[len(idxs):])
  block = 1
  for d in rest: block *= d
  lin, bad, stride = None, None, block
  for j in range(len(idxs) - 1, -1, -1):
    a = idxs[j]
    b = (a < 0) | (a >= shape[j])
    if np.any(b): bad = b if bad is None else bad | b
    term = a.astype(np.intp, copy=False) * stride if stride != 1 else a.astype(np.intp, copy=False)
    lin = term if lin is None else lin + term
    stride *= shape[j]
  if lin is None: lin = np.zeros((1,) * R, np.intp)
  if bad is not None:
    lin = np.where(bad, -1, lin)
    bad = np.broadcast_to(bad, lin.shape)
  if rest:
    lin = lin.reshape(lin.shape + (1,) * len(rest)) + np.arange(block, dtype=np.intp).reshape(rest)
    if bad is not None: lin = np.where(bad.reshape(bad.shape + (1,) * len(rest)), -1, lin)
  return lin, (None if bad is None else lin >= 0)


def apply_write(state: np.ndarray, w: Write, keep: int, loop_sizes: tuple, R: int) -> None:
  """Apply w to a private state array (P_keep..., S) in place: every point of w's loops,
  in iteration order; loops outside `keep` land on the same state (merged, last wins)."""
  pos = _one_place(state, w, R)
  if pos is not None:
    _write_one_element(state, pos, w.value, R)
    return
  if w.path and w.path[0][0] == "affine":
    if _write_affine(state, w, R): return
    w = Write(w.node, [("index", [affine_positions(*w.path[0][1], R)])], w.value, w.gate, w.mode)
  flat, shape, steps = resolve_target(state, w.path, R)
  ids, valid = target_positions(shape, steps, R)
  val = w.value
  if w.mode == "set" and valid is None and w.gate is None and ids.size == 1 and ids.ndim == R and np.ndim(val) == R:
    _write_one_element(flat, int(ids.reshape(-1)[0]), val, R)
    return
  nv = ids.ndim - R   # value dims of the target
  vshape = val.shape[:R]
  B = broadcast_shape(ids.shape[:R], vshape, flat.shape[:R], *(() if w.gate is None else (w.gate.shape[:R],)))
  full = B + ids.shape[R:]
  ids = np.broadcast_to(ids, full)
  val = np.broadcast_to(val.reshape(val.shape[:R] + (1,) * (nv - (val.ndim - R)) + val.shape[R:]), full)
  mask = None
  if valid is not None: mask = np.broadcast_to(valid, full)
  if w.gate is not None:
    g = np.broadcast_to(w.gate.reshape(w.gate.shape[:R] + (1,) * nv), full)
    mask = g if mask is None else (mask & g)
  # flat position in `flat`: loop coordinates on the kept axes, then the element id
  P = flat.shape[:R]
  npp = flat.shape[R]
  pos = ids.astype(np.intp, copy=False)
  stride = npp
  for d in range(R - 1, -1, -1):
    if P[d] > 1:
      coord = np.arange(P[d], dtype=np.intp).reshape((1,) * d + (P[d],) + (1,) * (len(full) - d - 1))
      pos = pos + coord * stride
    stride *= P[d]
  pos = np.broadcast_to(pos, full).reshape(-1)
  vals = val.reshape(-1)
  if mask is not None:
    m = mask.reshape(-1)
    pos, vals = pos[m], vals[m]
  target = flat.reshape(-1) if flat.flags.c_contiguous else None
  if w.mode == "add":
    if target is None: raise AssertionError("ATOMICADD into a strided view")
    np.add.at(target, pos, vals)
    return
  if pos.size > 1 and not (pos[1:] > pos[:-1]).all():
    _, last = np.unique(pos[::-1], return_index=True)   # keep the last write to each element
    sel = pos.size - 1 - last
    pos, vals = pos[sel], vals[sel]
  if target is not None:
    if pos.size and pos[-1] - pos[0] == pos.size - 1:   # strictly increasing and dense: a slice
      target[pos[0]:pos[-1] + 1] = vals
    else:
      target[pos] = vals
  else:
    flat[np.unravel_index(pos, flat.shape)] = vals


def _one_place(state: np.ndarray, w: Write, R: int) -> int | None:
  """The element of a 1-D storage that a plain, ungated store of one element per point
  writes at every point (a register's `acc[c] = v`: one INDEX whose index is the same
  everywhere, or an affine form without a loop of more than one iteration), when it is in
  range: apply_write then comes down to _write_one_element, as the general path would find
  after building the position arrays. None for any other write (and out of range: the
  general path writes nothing there)."""
  if w.mode != "set" or w.gate is not None or len(w.path) != 1 or state.ndim != R + 1 or np.ndim(w.value) != R: return None
  kind, data = w.path[0]
  if kind == "affine":
    form, sizes = data
    if form.vec is not None or any(sizes[d] != 1 for d in form.coefs): return None
    pos = form.const
  elif kind == "index" and len(data) == 1 and data[0].ndim == R and data[0].size == 1:
    pos = int(data[0].reshape(-1)[0])
  else: return None
  return pos if 0 <= pos < state.shape[R] else None


def last_writes(val: np.ndarray, R: int, apart) -> np.ndarray:
  """The values that remain of a write at every point: along the loop axes `apart` the points
  write to different places (each keeps its own); along any other axis they overwrite one
  another in iteration order, and the last iteration's value wins."""
  return val[tuple(slice(None) if d in apart or val.shape[d] <= 1 else slice(-1, None) for d in range(R))]


def _write_one_element(flat: np.ndarray, pos: int, val: np.ndarray, R: int) -> None:
  """apply_write of one element at every point (a register's `acc[c] = v`): along a loop the
  state keeps per point, each point's value; along one it does not, the last iteration's
  (the write that wins)."""
  if any(val.shape[d] == 0 and flat.shape[d] == 1 for d in range(R)): return   # a loop of no iterations writes nothing
  flat[..., pos] = last_writes(val, R, [d for d in range(R) if flat.shape[d] > 1])


# ------------------------------------------------------------------ writes at affine positions
def affine_positions(form, sizes: tuple, R: int) -> np.ndarray:
  """The index array an affine form (refimpl/affine.py) stands for, over loops of `sizes`."""
  out = np.full((1,) * R, form.const, np.int64)
  for d, c in form.coefs.items():
    out = out + c * np.arange(sizes[d], dtype=np.int64).reshape((1,) * d + (sizes[d],) + (1,) * (R - d - 1))
  if form.vec is not None: out = out[..., None] + (form.vec[0] + form.vec[1] * np.arange(form.vec[2], dtype=np.int64))
  return out


def _write_affine(state: np.ndarray, w: Write, R: int) -> bool:
  """apply_write of a plain store to a 1-D storage at affine positions that are in range and
  distinct at every point (so the order of the writes does not matter), with no state kept
  per point: one assignment through a strided view. False where the general path must do it."""
  form, sizes = w.path[0][1]
  if w.mode != "set" or w.gate is not None or state.ndim != R + 1 or any(n != 1 for n in state.shape[:R]): return False
  val = w.value
  own = 0 if form.vec is None else 1
  if np.ndim(val) != R + own or (own and val.shape[R] not in (1, form.vec[2])): return False
  n = state.shape[R]
  reach = affine_reach(form, sizes)
  if reach is None: return False
  if any(sizes[d] == 0 for d in form.coefs) or any(val.shape[d] == 0 for d in range(R)): return True   # no points: nothing written
  if reach[0] < 0 or reach[1] >= n: return False
  flat = state.reshape(n)
  step = flat.strides[0]
  shape = [sizes[d] if d in form.coefs else 1 for d in range(R)] + ([form.vec[2]] if own else [])
  strides = [form.coefs.get(d, 0) * step for d in range(R)] + ([form.vec[1] * step] if own else [])
  base = form.const + (form.vec[0] if own else 0)   # the position at the first point
  view = strided(flat, base, shape, strides, writeable=True)
  view[...] = last_writes(val, R, form.coefs)
  return True


def affine_reach(form, sizes: tuple):
  """(lowest, highest, count) of the positions an affine form takes over loops of `sizes`
  when they are distinct (every stride passes the span of the smaller ones), else None."""
  axes = [(abs(c), sizes[d]) for d, c in form.coefs.items() if sizes[d] > 1]
  if form.vec is not None and form.vec[2] > 1: axes.append((abs(form.vec[1]), form.vec[2]))
  lo = hi = form.const + (form.vec[0] if form.vec is not None else 0)
  span, count = 0, 1
  for c, k in sorted(axes):
    if c <= span: return None
    span += c * (k - 1)
    count *= k
  for d, c in form.coefs.items():
    lo, hi = lo + min(c * (sizes[d] - 1), 0), hi + max(c * (sizes[d] - 1), 0)
  if form.vec is not None:
    lo, hi = lo + min(form.vec[1] * (form.vec[2] - 1), 0), hi + max(form.vec[1] * (form.vec[2] - 1), 0)
  return lo, hi, count


def unfilled(shape: tuple, dtype) -> np.ndarray:
  """An array the caller writes every element of before anyone reads it."""
  return np.empty(shape, dtype)


def covers_all(w: Write, shape: tuple) -> bool:
  """Whether w, a plain ungated store through one affine INDEX into a 1-D storage of `shape`,
  writes every element (its distinct positions are exactly 0 .. n-1, at loops of at least one
  iteration): what the storage held before is then never seen."""
  if w.mode != "set" or w.gate is not None or len(w.path) != 1 or w.path[0][0] != "affine" or len(shape) != 1: return False
  form, sizes = w.path[0][1]
  if any(sizes[d] == 0 for d in form.coefs) or any(d == 0 for d in np.shape(w.value)): return False
  reach = affine_reach(form, sizes)
  return reach is not None and reach[0] == 0 and reach[1] == shape[0] - 1 and reach[2] == shape[0]


def strided(flat: np.ndarray, base: int, shape, strides, writeable: bool) -> np.ndarray:
  """A strided view of the 1-D `flat` from element `base`. NumPy's as_strided goes through
  the array interface, which cannot name the extended floats' NumPy types (ml_dtypes' float8s
  are '<f1'): those are viewed through the unsigned integer of their size and back."""
  src = flat[base:]
  bits = src.dtype in EXTENDED_FLOATS.values()
  if bits: src = src.view(np.dtype(f"u{src.dtype.itemsize}"))
  out = np.lib.stride_tricks.as_strided(src, tuple(shape), tuple(strides), writeable=writeable)
  return out.view(flat.dtype) if bits else out
