"""Bank conflicts on local memory (compiler/analysis/localbanks.py), the staged tile's row pitch
that avoids them in the multiply loop (compiler/passes/tiles.py `_pitch`), and the race proof
that accepts a padded tile (compiler/analysis/parallel.py `_superincreasing`, `_covers`).
CI has no GPU: the counts are checked against hand-worked warps, a planted unpadded tile
must be reported, a planted overlapping pitch must be refused, and the padded kernels run
on PoCL where it is installed (tests/compiler/test_compiler_gpu_static.py)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.device import table_device
from tinyspec.compiler.analysis.gpucheck import launch_report, problems
from tinyspec.compiler.analysis.localbanks import ways, warp_items
from tinyspec.compiler.passes import tiles as S
from tinyspec.compiler.analysis import parallel as P

from targets import HAVE_CL, CL_UNAVAILABLE


@pytest.fixture(scope="module")
def h100():
  return table_device("h100")


def gemm(a, b):
  M, K = a.shape
  N = b.shape[1]
  return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1)


def _gemm(n, h100):
  x = np.ones((n, n), np.float32)
  return compile_graph(gemm(Tensor(x), Tensor(x)).graph(), "opencl", keep_stages=False, device=h100)


# ------------------------------------------------------------------ the count, by hand
LANES = np.arange(32)[:, None]


@pytest.mark.parametrize("offsets,itemsize,want", [
  (LANES, 4, 1),                       # consecutive floats: 32 banks
  (LANES * 0, 4, 1),                   # one word for the whole warp: a broadcast
  (LANES * 2, 4, 2),                   # stride 2: two lanes per bank
  (LANES * 32, 4, 32),                 # one column of a 32-wide tile: one bank
  (LANES * 33, 4, 1),                  # ... padded to 33: every bank once
  (LANES // 16 * 64 + LANES % 16 * 0, 4, 2),   # two broadcasts 64 words apart: the same bank, two words
  (LANES * 4 + np.arange(4), 4, 1),    # float4, consecutive: served a quarter warp (8 lanes) at a time
  (LANES * 8 + np.arange(4), 4, 2),    # float4 every 8 words: 8 lanes cover 64 words, two per bank
  (LANES, 8, 1),                       # doubles: 2 words each, half a warp per phase
  (LANES * 16, 8, 16),                 # doubles 16 apart (32 words): every lane in banks 0 and 1
  (LANES // 2, 2, 1),                  # halves: two lanes per word
])
def test_ways_by_hand(offsets, itemsize, want):
  assert ways(np.asarray(offsets), itemsize) == want


def test_warp_items_run_local_id_0_fastest():
  items = warp_items([16, 16], 32)
  assert items.shape == (32, 2) and items[:16, 0].tolist() == list(range(16)) and set(items[:16, 1]) == {0} and set(items[16:, 1]) == {1}
  assert warp_items([8], 32).tolist() == [[i] for i in range(8)]      # a group narrower than a warp


# ------------------------------------------------------------------ the staged gemm
def test_staged_gemm_reads_its_tiles_without_conflicts(h100):
  """A's tile (64 rows of 16 k) is read one row per half warp, rows 4 apart: with rows 16
  words long two rows share a bank. The pitch is 17: the reads are conflict-free, the
  copy (4 stores per step against 64 reads) takes a 2-way conflict."""
  c = _gemm(2048, h100)
  (k,) = launch_report(c, h100)
  assert "__local float l0[1088];" in c.sources[0].body           # 64 rows x 17
  hot = [b for b in k.local_accesses if b.trips == k.hot_trips]
  assert hot and all(b.ways == 1 and not b.store for b in hot)
  assert max(b.ways for b in k.local_accesses) == 2
  assert problems([k], h100) == []


def test_an_unpadded_tile_is_reported(h100, monkeypatch):
  monkeypatch.setattr(S, "_pitch", lambda t0, t1, j, f, R1, *a: R1)
  c = _gemm(2048, h100)
  ps = problems(launch_report(c, h100), h100)
  assert "__local float l0[1024];" in c.sources[0].body
  assert any("load of local l0 (1 wide) in the multiply loop has a 2-way bank conflict" in p for p in ps), ps


def test_pitch_is_not_chosen_without_a_warp(h100):
  """A device with no warp width (a CPU, an unknown GPU) keeps the tile dense."""
  import dataclasses
  dev = dataclasses.replace(h100, warp=1)
  c = _gemm(2048, dev)
  assert "__local float l0[1024];" in c.sources[0].body


def test_an_overlapping_pitch_is_refused_by_the_race_proof(h100, monkeypatch):
  """A planted pitch shorter than the rows makes rows overlap: two work items would write
  one element. The race proof refuses the staging; the kernel keeps global reads."""
  monkeypatch.setattr(S, "_pitch", lambda t0, t1, j, f, R1, *a: R1 - 1)
  c = _gemm(2048, h100)
  (k,) = launch_report(c, h100)
  assert not k.local_tiled and "__local" not in c.sources[0].body


@pytest.mark.skipif(not HAVE_CL, reason=f"OpenCL unavailable: {CL_UNAVAILABLE}")
@pytest.mark.parametrize("pitch", [17, 20, 31])
def test_padded_tiles_run_and_agree(pitch, h100, monkeypatch):
  """Whatever pitch A's tile (16 k wide, read as scalars) gets, the staged gemm is the
  product (PoCL). B's tile is read as float4 and keeps its width."""
  monkeypatch.setattr(S, "_pitch", lambda t0, t1, j, f, R1, *a: pitch if R1 == 16 else R1)
  rng = np.random.default_rng(pitch)
  a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 192)).astype(np.float32)
  t = gemm(Tensor(a), Tensor(b))
  c = compile_graph(t.graph(), "opencl", keep_stages=False, device=h100)
  assert f"__local float l0[{64 * pitch}];" in c.sources[0].body
  got = c.run(t.inputs())
  got = np.asarray(got["out0"] if isinstance(got, dict) else got, np.float64).reshape(128, 192)
  np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4 * 8)


# ------------------------------------------------------------------ the proof's new case
def _r(n, id_):
  return UOp("RANGE", (UOp("CONST", (), {"value": n, "dtype": "index"}),), {"id": id_, "type": "LOCAL"})


def test_superincreasing_sums_are_one_to_one():
  i, j, k = _r(16, 0), _r(16, 1), _r(4, 2)
  assert P._superincreasing({i: 1, j: 17, k: 272})        # a 64 x 17 tile: row j + 16k, column i
  assert P._superincreasing({i: 1, j: 16})                # dense
  assert not P._superincreasing({i: 1, j: 15})            # rows overlap: 15 + 0 == 0 + 15
  assert not P._superincreasing({i: 1, j: 17, k: 250})    # the third digit reaches back: 250 < 15 + 17 * 15
  # brute force agrees on small cases
  for c in ([1, 5], [1, 4], [2, 31], [1, 17, 271], [1, 17, 272]):
    terms = dict(zip((i, j, k), c))
    grids = np.meshgrid(*[np.arange(16 if t is not k else 4) for t in terms], indexing="ij")
    vals = sum(cc * g for cc, g in zip(c, grids)).ravel()
    assert P._superincreasing(terms) <= (len(np.unique(vals)) == len(vals)), c
