"""Races on a work-group's local memory, read from a rendered OpenCL kernel (its LINEAR
and its KernelSource) without running it: compiler/analysis/gpucheck.py reports them.

The work items of a work-group run the kernel's instructions at once; a BARRIER is the
only thing that orders one item's accesses before another's. So the instructions fall
into *epochs*, the stretches between BARRIERs; a loop holding a BARRIER starts a new one,
its head (up to its first BARRIER), which meets the epoch before the loop and the loop's
tail (after its last BARRIER: the next trip runs on from there), and the tail goes on
after the loop. Two accesses of one __local buffer in one epoch, or in two that meet,
race when one of them writes and some
element is touched by two different work items. Which items touch which elements is
counted, not proved: every work item of the group (the local sizes) and every trip of
the loops open at the access is enumerated and the index evaluated with NumPy. A lane
(a range rendered as get_local_id, compiler/render) is the item's id; a lane
narrower than the group (a tree combine's step) runs on the items below its bound. An
index the evaluator cannot follow (it depends on loaded data) touches every element. A
BARRIER that not every item reaches (inside a narrower lane or an IF) is a problem too.
"""
from __future__ import annotations
import numpy as np
from tinyspec.tables import tables
from tinyspec.uop import UOp
from tinyspec.props import props
from tinyspec.compiler.render.nodes import base_of as _base, is_local as _is_local
from tinyspec.refimpl.alu import alu, has_alu

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)

LIMIT = 1 << 22    # (item, trip) points enumerated per access; beyond, the access is "every element"


def _eval(u: UOp, env: dict, memo: dict):
  """u's value as an int64 array over the enumerated points (None: not followable). Index
  arithmetic is evaluated by the reference's own units (refimpl/alu.py): IDIV floors, MOD
  takes the divisor's sign, exactly as the rendered kernel computes them."""
  if u in memo: return memo[u]
  dt = props(u).dtype
  if u in env: r = env[u]
  elif u.op == "CONST" and isinstance(u.arg["value"], (int, bool)): r = np.int64(int(u.arg["value"]))
  elif u.op == "VCONST" and all(isinstance(v, (int, bool)) for v in u.arg["values"]): r = np.asarray(u.arg["values"], np.int64)   # a vector access's lanes
  elif u.op == "CAST" and dt in _INDEXLIKE and props(u.src[0]).dtype in _INDEXLIKE: r = _eval(u.src[0], env, memo)
  elif has_alu(u.op) and (dt in _INDEXLIKE or dt == "bool") and all(props(s).dtype in _INDEXLIKE or props(s).dtype == "bool" for s in u.src):
    xs = [_eval(s, env, memo) for s in u.src]
    r = None if any(x is None for x in xs) else np.asarray(alu(u.op, dt, *xs, src_dtypes=tuple(props(s).dtype for s in u.src))).astype(np.int64)
  else: r = None
  memo[u] = r
  return r


_INDEXLIKE = ("index", "int32", "int64", "uint32", "uint64")


def local_races(ks, lin: UOp) -> list[str]:
  """The races (and unreachable BARRIERs) on __local memory of one rendered kernel."""
  if not ks.local_size: return []
  sizes = [int(s) for s in ks.local_size]
  items = np.indices(sizes).reshape(len(sizes), -1).T if sizes else np.zeros((1, 0), np.int64)
  lane_dim = {r: int(b[len("get_local_id("):-1]) for b, rs in ks.work_lanes.items() if b.startswith("get_local_id(") for r in rs}
  lane_dim.update({u: int(b[-2]) for b, u in ks.work_ids.items() if b.startswith("get_local_id(")})
  fixed = {u for b, u in ks.work_ids.items() if not b.startswith("get_local_id(")}       # one value per work-group
  fixed |= {r for b, rs in ks.work_lanes.items() if not b.startswith("get_local_id(") for r in rs}
  specials = [u for u in lin.src if u.op == "SPECIAL" and u in lane_dim]                  # open everywhere
  users: dict = {}
  for u in lin.src:
    for k, s in enumerate(u.src): users.setdefault(s, []).append((u, k))
  with_barrier, stack = set(), []      # the loops that hold a BARRIER
  for u in lin.src:
    if u.op == "RANGE": stack.append(u)
    elif u.op == "END" and stack and stack[-1] is u.src[1]: stack.pop()
    elif u.op == "BARRIER": with_barrier |= set(stack)
  meets = set()      # pairs of epochs whose instructions may run at once (besides an epoch with itself)
  epoch, loops, open_, ifs = 0, [], [], 0
  acc: list = []
  out: list[str] = []
  for u in lin.src:
    if u.op == "RANGE":
      if u in fixed: continue
      open_.append(u)
      if u in with_barrier and u not in lane_dim:
        # the loop's head (up to its first BARRIER) runs beside what precedes the loop and,
        # on the next trip, beside the loop's tail (after its last BARRIER)
        epoch += 1
        meets.add((epoch - 1, epoch))
        loops.append((u, epoch))
    elif u.op == "END":
      r = u.src[1]
      if r in open_: open_.remove(r)
      if loops and loops[-1][0] is r:
        _, head = loops.pop()
        if epoch != head: meets.add((head, epoch))
    elif u.op == "IF": ifs += 1
    elif u.op == "ENDIF": ifs -= 1
    elif u.op == "BARRIER":
      if ifs or any(r in lane_dim and _narrow(r, sizes[lane_dim[r]]) for r in open_):
        out.append(f"{ks.name}: a BARRIER inside a branch (not every work item reaches it)")
      epoch += 1
    elif u.op == "INDEX" and _is_local(_base(u.src[0])):
      write = any(x.op in WRITES and k == 0 for x, k in users.get(u, []))
      acc.append((_base(u.src[0]), epoch, write, u, specials + open_))
  touched = [(b, e, w, u, _touches(u, o, items, lane_dim, fixed)) for b, e, w, u, o in acc]
  for i, (b, e, w, _u, t) in enumerate(touched):
    for b2, e2, w2, _u2, t2 in touched[i:]:
      if b2 is b and (e2 == e or (min(e, e2), max(e, e2)) in meets) and (w or w2) and _clash(t, t2):
        out.append(f"{ks.name}: work items race on local buffer l{b.arg['slot']}: "
                   f"{'a write' if w else 'a read'} and {'a write' if w2 else 'a read'} between the same BARRIERs")
        break
  return list(dict.fromkeys(out))


def _narrow(r: UOp, width: int) -> bool:
  return r.src[0].op != "CONST" or int(r.src[0].arg["value"]) < width


def _touches(index: UOp, open_: list, items: np.ndarray, lane_dim: dict, fixed: set):
  """(item number, element) pairs the access touches, or None (every item, every element)."""
  live = np.ones(len(items), bool)
  env: dict = {}
  for r in open_:
    if r in lane_dim:
      ids = items[:, lane_dim[r]].astype(np.int64)
      if r.src[0].op != "CONST": return None
      live &= ids < int(r.src[0].arg["value"])
      env[r] = ids
  loops = [r for r in open_ if r not in lane_dim]
  trips = 1
  for r in loops:
    if r.src[0].op != "CONST": return None
    trips *= int(r.src[0].arg["value"])
  n = int(live.sum())
  if n * trips > LIMIT: return None
  sel = np.nonzero(live)[0]
  grids = np.meshgrid(sel, *[np.arange(int(r.src[0].arg["value"])) for r in loops], indexing="ij")
  who = grids[0].ravel()
  # values are (point, lane) arrays: a vector access (float4) touches its lanes' elements too
  env = {r: v[who][:, None] for r, v in env.items()}
  env.update({r: np.int64(0) for r in fixed})   # the group's own ids: the same for all its items (group 0 stands for each)
  for r, g in zip(loops, grids[1:]): env[r] = g.ravel().astype(np.int64)[:, None]
  memo: dict = {}
  shape = props(index.src[0]).shape or ()
  flat = np.zeros((len(who), 1), np.int64)
  for i, d in zip(index.src[1:], shape):
    v = _eval(i, env, memo)
    if v is None: return None
    flat = flat * d + v
  flat = np.broadcast_to(flat, (len(who), flat.shape[-1]))
  return np.unique(np.stack([np.broadcast_to(who[:, None], flat.shape).ravel(), flat.ravel()], 1), axis=0)


def _clash(a, b) -> bool:
  """Does some element get touched by two different work items (a's or b's)?"""
  if a is None or b is None: return True
  both = np.intersect1d(a[:, 1], b[:, 1])
  if not len(both): return False
  pts = np.unique(np.concatenate([a, b])[np.isin(np.concatenate([a[:, 1], b[:, 1]]), both)], axis=0)
  _, counts = np.unique(pts[:, 1], return_counts=True)
  return bool((counts > 1).any())
