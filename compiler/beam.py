"""BEAM search: OptOps chosen by timing real candidates on the device.

  best_opts(kernel_sink, target, width) -> the OptOp list to compile the kernel with

A kernel (a SINK over PARAMs, as rangeify makes it) is compiled as a program of its own
(compile_graph of the kernel-level graph) with each candidate OptOp list, bound to random
inputs once (Executable.bind) and launched: the median of a few warm launches is its
time. The search keeps the `width` fastest lists, extends each by every action
(`actions`: SPLITs of every axis to every type the tables allow it, PADTO, SWAP, and on
GPUs STAGE of a reduce axis: its inputs read through local memory), and
stops when a round finds nothing faster. The heuristics' list (compiler/passes/heuristics.py) is
always a candidate, and the winner replaces it only when it is measurably faster (by
`MARGIN`, re-timed head to head), so BEAM never makes a kernel slower than the default.

The winner is cached on disk per kernel and device: $TINYSPEC_CACHE/beam/<key>.json, the
key hashing the kernel's graph (structure, args, dtypes, shapes), the target, the device
(compiler.device.Device.key) and the width. A second compile reads it instead of
searching (a file read and a hash: a few ms).
"""
from __future__ import annotations
import hashlib
import json
import time
import numpy as np
from tinyspec.uop import UOp, toposort
from tinyspec.tables import tables
from tinyspec.dispatch import input_name
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError, REFUSED
from tinyspec.compiler.analysis.axes import ranges, axis_type, size, top_nest, PARALLEL
from tinyspec.compiler.passes.optimize import apply_opts, initial_types, opts_fit
from tinyspec.intervals import np_dtype
from tinyspec.compiler.pipeline import lower
from tinyspec.compiler.render import assemble
from tinyspec.compiler.executor import Executable
from tinyspec.compiler.runtime import BuildError
from tinyspec.compiler.runtime.opencl import Built
from tinyspec.compiler.runtime.c import build
from concurrent.futures import ThreadPoolExecutor
from tinyspec.compiler.device import device
from tinyspec.compiler.passes.heuristics import default_opts
from tinyspec.compiler.analysis.symbolic import _key as structure
from tinyspec.compiler.runtime.cache import cache_dir
from tinyspec.compiler.runtime.cache import fetch, store

FACTORS = (2, 3, 4, 8, 16)
MARGIN = 0.95          # a candidate must take under 95% of the default's time to replace it
MAX_ROUNDS = 4
HEAD_TO_HEAD = 7       # alternating rounds of the winner against the default
MAX_LANES = 128        # UPCAST x UNROLL sizes of a candidate: more is code bloat, never speed
RUNS = 5
BUILD_TIMEOUT = 60.0   # seconds for one C compiler run over a batch of candidates (heavily
                       # unrolled transcendental code has taken GCC over 10 minutes)


# ------------------------------------------------------------------ the actions
def actions(sink: UOp, target: str, dev, every: bool = False) -> list[list]:
  """Every single OptOp that could extend the kernel's opts (not all legal: the caller
  applies them, and a refusal drops the action). Only the types worth timing on the
  device, unless `every` (the property tests try them all)."""
  T = tables().axis_types
  out: list[list] = []
  axes = ranges(sink)
  nest = top_nest(sink)
  for i, r in enumerate(axes):
    n = size(r)
    if n is None: continue
    cur = axis_type(r)
    for kind, at in T.items():
      if cur not in at.get("split_from", []): continue
      if not every:
        if kind in ("LOCAL", "GROUP_REDUCE") and not (dev.kind == "gpu" or (kind == "GROUP_REDUCE" and target == "c")): continue
        if kind == "THREAD" and (target != "c" or dev.threads < 2): continue
      d = at.get("direction")
      tops = [None] if isinstance(d, str) or d is None else [False, True]
      for k in FACTORS if kind != "THREAD" or every else sorted({dev.threads, 2 * dev.threads}):
        if k < n and n % k == 0:
          for top in tops: out.append(["SPLIT", i, [k, kind] + ([top] if top is not None else [])])
    if cur == "REDUCE" and target == "opencl" and (every or dev.kind == "gpu"):   # inputs staged through local memory, k steps a tile
      out += [["STAGE", i, k] for k in FACTORS if k < n and n % k == 0]
    if every:
      out += [["PADTO", i, m] for m in (4, 8) if n % m]
    elif cur in ("GLOBAL", "REDUCE") and n > 16 and n % 16: out.append(["PADTO", i, 16])
  if nest is not None:
    par = [axes.index(r) for r in nest[1] if axis_type(r) in PARALLEL]
    for a in range(len(par)):
      for b in range(a + 1, len(par)): out.append(["SWAP", par[a], par[b]])
  return out


def lanes(sink: UOp) -> int:
  n = 1
  for r in ranges(sink):
    if axis_type(r) in ("UPCAST", "UNROLL"): n *= size(r) or 1
  return n


def legal(sink: UOp, opts: list, target: str, dev) -> UOp | None:
  """The kernel with the opts applied, or None when they are refused or expand too far."""
  try: out = apply_opts(initial_types(sink), opts, target, dev)
  except REFUSED: return None
  return out if lanes(out) <= MAX_LANES else None


# ------------------------------------------------------------------ timing a candidate
def random_inputs(sink: UOp, seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  out = {}
  for u in toposort(sink):
    if u.op != "PARAM": continue
    pr = props(u)
    name = input_name(u.op, u.arg)
    if len(u.src) == 3: out[name] = np.asarray(pr.min_max[1], np_dtype(pr.dtype)); continue
    dt = np_dtype(pr.dtype)
    if dt.kind == "f": out[name] = rng.standard_normal(pr.shape).astype(dt)
    elif dt.kind == "b": out[name] = rng.integers(0, 2, pr.shape).astype(bool)
    else: out[name] = rng.integers(0, 4, pr.shape).astype(dt)
  return out


class Timer:
  """Compiles and times OptOp lists for one kernel."""
  def __init__(self, sink: UOp, target: str, dev):
    self.sink, self.target, self.dev = sink, target, dev
    self.inputs = random_inputs(sink)
    self.times: dict[tuple, float] = {}

  def compile(self, opts: list):
    try:
      return lower(self.sink, self.target, [list(o) for o in opts], keep_stages=False)
    except CompileError:
      return None

  def build(self, opts_list: list[list]) -> list:
    """Bound programs for the candidates (None where refused), every kernel built in one
    translation unit: one run of the C compiler (or OpenCL build) per batch."""
    compiled = [self.compile(o) for o in opts_list]
    ok = [c for c in compiled if c is not None and c.sources]
    # every candidate's kernels (a tiled one may have a packing kernel too) renamed apart
    for n, c in enumerate(ok):
      for j, ks in enumerate(c.sources):
        c.sources[j] = ks.renamed(f"b{n}_{ks.name}")
    if not ok: return [None] * len(opts_list)
    # two translation units built side by side (the compiler is a subprocess)
    halves = [ok[:len(ok) // 2], ok[len(ok) // 2:]] if len(ok) > 1 else [ok]
    srcs = [assemble([ks for c in h for ks in c.sources], self.target) for h in halves]
    def make(src):
      """(built?, the OpenCL program or None): a unit that fails, or whose C build takes
      longer than BUILD_TIMEOUT, is (False, None) and its candidates drop out."""
      try:
        if self.target == "opencl":
          return True, Built(src)
        build(src, timeout=BUILD_TIMEOUT)
        return True, None
      except BuildError:
        return False, None
    if self.target == "opencl": builts = [make(x) for x in srcs]
    else:
      with ThreadPoolExecutor(2) as ex: builts = list(ex.map(make, srcs))
    where = {id(c): (srcs[k], builts[k][1]) for k, h in enumerate(halves) if builts[k][0] for c in h}
    return [Executable(c, *where[id(c)]).bind(self.inputs) if c is not None and id(c) in where else None for c in compiled]

  def time(self, bound, runs: int = RUNS, cap: float | None = None) -> float:
    bound.run()
    ts = []
    for _ in range(runs):
      t = time.perf_counter(); bound.run(); ts.append(time.perf_counter() - t)
      if cap is not None and ts[-1] > 3 * cap: break      # hopeless: stop early
    return float(np.median(ts))

  def measure(self, cands: list[list], cap: float | None = None) -> dict[tuple, float]:
    """Time every candidate not timed yet."""
    todo = [c for c in cands if _key(c) not in self.times]
    for c, b in zip(todo, self.build(todo)):
      self.times[_key(c)] = self.time(b, cap=cap) if b is not None else float("inf")
    return {_key(c): self.times[_key(c)] for c in cands}


def _key(opts) -> tuple:
  return tuple(json.dumps(o) for o in opts)


# ------------------------------------------------------------------ the search
def search(sink: UOp, target: str, width: int, dev=None, log=None) -> list:
  dev = dev or device(target)
  typed = initial_types(sink)
  default = default_opts(typed, target, dev, opts_fit(typed, target, dev))
  timer = Timer(sink, target, dev)
  start = [[], default] if default else [[]]
  t = timer.measure(start)
  beam = sorted(start, key=lambda o: t[_key(o)])[:width]
  best = beam[0]
  for rnd in range(MAX_ROUNDS):
    cands, seen = [], set()
    for opts in beam:
      cur = legal(sink, opts, target, dev)
      if cur is None: continue
      for a in actions(cur, target, dev):
        new = opts + [a]
        k = _key(new)
        if k in seen or k in timer.times: continue
        seen.add(k)
        if legal(sink, new, target, dev) is not None: cands.append(new)
    if not cands: break
    t = timer.measure(cands, cap=timer.times[_key(best)])
    pool = sorted(beam + cands, key=lambda o: timer.times[_key(o)])
    beam = pool[:width]
    if log: log(f"round {rnd}: {len(cands)} candidates, best {timer.times[_key(beam[0])] * 1e3:.3f} ms {beam[0]}")
    if timer.times[_key(beam[0])] >= timer.times[_key(best)]: break
    best = beam[0]
  if best == default: return default
  # the winner against the default, head to head
  b_best, b_def = timer.build([best, default])
  if b_best is None: return default
  if b_def is None: return best      # the default does not build as a program of its own
  # alternating rounds; the winner must be faster by MARGIN in the median round and in
  # its best round alike, so that one lucky moment of a shared machine does not decide
  tb, td = [], []
  for _ in range(HEAD_TO_HEAD):
    tb.append(timer.time(b_best, runs=3)); td.append(timer.time(b_def, runs=3))
  faster = np.median(tb) < MARGIN * np.median(td) and min(tb) < MARGIN * min(td)
  return best if faster else default


# ------------------------------------------------------------------ the cache
def kernel_key(sink: UOp, target: str, width: int, dev) -> str:
  h = hashlib.sha256()
  h.update(repr(structure(sink)).encode())
  h.update(f"\0{target}\0{dev.key()}\0{width}".encode())
  return h.hexdigest()[:32]


def _cache_path(key: str):
  return cache_dir("beam") / f"{key}.json"


def best_opts(sink: UOp, target: str, width: int, dev=None, log=None) -> list:
  """The cached BEAM winner for the kernel, searching (and caching) when there is none."""
  dev = dev or device(target)
  key = kernel_key(sink, target, width, dev)
  path = _cache_path(key)
  data = fetch(path)   # a signed entry of this cache, or None (garbage or a planted file: searched again)
  if data is not None:
    try:
      opts = json.loads(data)["opts"]
      if isinstance(opts, list): return opts
    except (ValueError, KeyError, TypeError, RecursionError):
      pass
  opts = search(sink, target, width, dev, log)
  store(path, json.dumps({"opts": opts, "target": target, "device": dev.key(), "width": width}).encode())
  return opts
