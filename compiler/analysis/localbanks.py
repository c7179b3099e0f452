"""Bank conflicts on a work-group's local memory, read from a rendered OpenCL kernel (its
LINEAR and its KernelSource) without running it: compiler/analysis/gpucheck.py reports them.

A GPU's local memory is cut into banks (32 banks of 4-byte words on NVIDIA and AMD GPUs:
spec/render.yaml devices.opencl `local_banks`). The lanes of a warp access
it together: lanes that touch different words of one bank are served one after another
(an n-way conflict costs n passes), lanes that touch the same word share it (a
broadcast). An access wider than a word (a float4) is served in phases of
banks x bank_bytes bytes, i.e. a quarter warp at a time for 16 bytes per lane.

The first warp of the work-group (its items in the order of their linear id, local id 0
fastest) is enumerated with every loop at its first trip -- a loop variable moves every
lane's address alike, which a bank mapping of linear addresses does not care about --
and each address is evaluated with NumPy (compiler/analysis/localrace._eval, which also gives a
vector access its lanes' elements). The worst phase's ways are the access's conflict.
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from tinyspec.tables import tables
from tinyspec.uop import UOp
from tinyspec.props import props
from tinyspec.compiler.render.nodes import base_of as _base, is_local as _is_local
from tinyspec.compiler.analysis.localrace import _eval
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.rendertables import render_tables

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)


@dataclass
class LocalAccess:
  buffer: int          # the LOCAL buffer's slot
  store: bool
  width: int           # elements per lane
  ways: int | None     # the worst phase's passes (1: conflict-free; None: the address is not followable)
  node: UOp = None     # the INDEX
  trips: int = 1       # how often a work item runs it (the constant loops open at it; compiler/analysis/gpucheck.py fills it)


def warp_items(local_size: list, warp: int) -> np.ndarray:
  """The local ids (one row per item, a column per dim) of the work-group's first warp."""
  sizes = [int(s) for s in local_size]
  ids = np.indices(sizes[::-1]).reshape(len(sizes), -1).T[:, ::-1]   # id 0 fastest
  return ids[:max(1, min(warp, len(ids)))].astype(np.int64)


def conflict_ways(words: np.ndarray, live: np.ndarray, lanes_per_phase: int, banks: int) -> int:
  """The most distinct words one bank serves in one phase. words: (lanes, words per lane)."""
  worst = 1
  for lo in range(0, len(words), lanes_per_phase):
    w = np.unique(words[lo:lo + lanes_per_phase][live[lo:lo + lanes_per_phase]].ravel())
    if len(w): worst = max(worst, int(np.bincount(w % banks).max()))
  return worst


def banks() -> tuple[int, int]:
  """(banks, bytes per bank word) of a GPU's local memory (spec/render.yaml devices.opencl)."""
  b = render_tables()["devices"]["opencl"].get("local_banks", {"banks": 32, "bytes": 4})
  return int(b["banks"]), int(b["bytes"])


def ways(flat: np.ndarray, itemsize: int, live: np.ndarray | None = None) -> int:
  """The worst phase's passes of one warp access: flat holds each lane's element offsets
  (lanes, elements per lane) of `itemsize`-byte elements."""
  nb, bank_bytes = banks()
  flat = np.asarray(flat, np.int64).reshape(len(flat), -1)
  width = flat.shape[1]
  words = flat * itemsize // bank_bytes
  if itemsize > bank_bytes: words = np.concatenate([(flat * itemsize + b) // bank_bytes for b in range(0, itemsize, bank_bytes)], axis=1)
  per_phase = max(1, nb * bank_bytes // max(bank_bytes, width * itemsize))
  return conflict_ways(words, np.ones(len(flat), bool) if live is None else live, per_phase, nb)


def bank_conflicts(ks, lin: UOp, warp: int) -> list[LocalAccess]:
  """Every access of a __local buffer in one rendered kernel, with its ways."""
  if not ks.local_size or warp <= 1: return []
  items = warp_items(ks.local_size, warp)
  lane_dim = {r: int(b[len("get_local_id("):-1]) for b, rs in ks.work_lanes.items() if b.startswith("get_local_id(") for r in rs}
  lane_dim.update({u: int(b[-2]) for b, u in ks.work_ids.items() if b.startswith("get_local_id(")})
  users: dict = {}
  for u in lin.src:
    for k, s in enumerate(u.src): users.setdefault(s, []).append((u, k))
  out = []
  for u in lin.src:
    if u.op != "INDEX" or not _is_local(_base(u.src[0])): continue
    buf = _base(u.src[0])
    store = any(x.op in WRITES and k == 0 for x, k in users.get(u, []))
    flat, live = _addresses(u, items, lane_dim)
    item = _dt(props(buf).dtype).itemsize
    shp = props(u).shape or ()
    width = int(shp[-1]) if shp else 1
    out.append(LocalAccess(buf.arg["slot"], store, width, None if flat is None else ways(flat, item, live), u))
  return out


def _addresses(index: UOp, items: np.ndarray, lane_dim: dict):
  """((lanes, elements per lane) element offsets, which lanes take part), or (None, None)."""
  env: dict = {}
  live = np.ones(len(items), bool)
  for r, d in lane_dim.items():
    if d >= items.shape[1]: continue
    env[r] = items[:, d][:, None]
    if r.src[0].op == "CONST": live &= items[:, d] < int(r.src[0].arg["value"])
  memo: dict = {}
  # every other RANGE and SPECIAL (loops, the group's own ids) at its first value
  for x in _leaves(index.src[1:]):
    if x not in env: env[x] = np.int64(0)
  shape = props(index.src[0]).shape or ()
  flat = np.zeros((len(items), 1), np.int64)
  for i, d in zip(index.src[1:], shape):
    v = _eval(i, env, memo)
    if v is None: return None, None
    flat = flat * int(d) + v
  return np.broadcast_to(flat, (len(items), flat.shape[-1])), live


def _leaves(roots):
  """The RANGE and SPECIAL nodes an index depends on."""
  seen, stack = set(), list(roots)
  while stack:
    x = stack.pop()
    if x in seen: continue
    seen.add(x)
    if x.op in ("RANGE", "SPECIAL"): yield x; continue
    stack.extend(x.src)
