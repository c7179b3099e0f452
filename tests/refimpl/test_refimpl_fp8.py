"""The float8 dtypes' conversion (decision fp8-convert, refimpl/numeric.py to_saturating)
against tinygrad's own float_to_fp8 / fp8_to_float: every bit pattern, every midpoint
between neighbours and the floats just either side of it (the ties), overflow past the
saturation threshold, subnormals, ±inf, NaN and -0.0; then a few values by hand, which
need no tinygrad; and a sum past the largest finite."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.dtypes import DTYPES
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP, to_saturating

FLOAT8 = sorted(n for n, d in DTYPES.items() if d.saturate)


def test_the_table_has_the_four_float8_dtypes():
  assert FLOAT8 == ["float8_e4m3", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]


def _dense(name: str) -> np.ndarray:
  """Every value of the dtype, the midpoints of neighbours and the floats either side of
  them, values past the largest finite, deep subnormals, random magnitudes and specials."""
  grid = np.arange(256, dtype=np.uint8).view(NP[name]).astype(np.float64)
  fin = np.unique(grid[np.isfinite(grid)])
  mids = (fin[1:] + fin[:-1]) / 2
  top = DTYPES[name].normal_range[1]
  rng = np.random.default_rng(8)
  rand = rng.standard_normal(3000) * np.exp2(rng.integers(-30, 24, 3000))
  special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300, -1e300, 5e-324, -5e-324, top * 1.03125, top * 1.0625, top * 1.125]
  return np.concatenate([grid, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), rand, special,
                         rand.astype(np.float32).astype(np.float64)])


@pytest.mark.parametrize("name", FLOAT8)
def test_conversion_is_tinygrads_float_to_fp8(name):
  tg = pytest.importorskip("tinygrad.dtype")
  t = getattr(tg.dtypes, {"float8_e4m3": "fp8e4m3", "float8_e5m2": "fp8e5m2", "float8_e4m3fnuz": "fp8e4m3fnuz",
                          "float8_e5m2fnuz": "fp8e5m2fnuz"}[name])
  xs = _dense(name)
  got = to_saturating(xs, name).view(np.uint8)
  want = np.array([tg.float_to_fp8(float(x), t) for x in xs], np.uint8)
  bad = np.flatnonzero(got != want)
  assert not len(bad), [(float(xs[i]), hex(got[i]), hex(want[i])) for i in bad[:8]]
  # from float32 too (the arithmetic's path): the same bits
  with np.errstate(over="ignore"): x32 = xs.astype(np.float32)
  assert (to_saturating(x32, name).view(np.uint8) == np.array([tg.float_to_fp8(float(x), t) for x in x32], np.uint8)).all()
  # decoding every bit pattern: ml_dtypes' storage type reads them as tinygrad's fp8_to_float does
  patterns = np.arange(256, dtype=np.uint8)
  mine = patterns.view(NP[name]).astype(np.float64)
  theirs = np.array([tg.fp8_to_float(int(p), t) for p in patterns])
  assert np.array_equal(mine, theirs, equal_nan=True) and np.array_equal(np.signbit(mine[~np.isnan(mine)]), np.signbit(theirs[~np.isnan(theirs)]))


def test_hand_values():
  bits = lambda xs, name: to_saturating(np.array(xs, np.float64), name).view(np.uint8).tolist()
  # e4m3: 2^-10 (half the smallest subnormal) ties to 0, just above it rounds up; 448 is 0x7e, 480 saturates
  assert bits([2.0 ** -10, 2.0 ** -10 * 1.0001, 448.0, 480.0, -1e6, np.nan, -np.nan, -np.inf], "float8_e4m3") == [0, 1, 0x7E, 0x7E, 0xFE, 0x7F, 0xFF, 0xFF]
  # e5m2: 57344 is 0x7b; 61440 (the tie above it) saturates; inf stays inf
  assert bits([57344.0, 61440.0, np.inf, -np.inf, np.nan], "float8_e5m2") == [0x7B, 0x7B, 0x7C, 0xFC, 0x7F]
  # fnuz: no -0.0 (0x80 is the NaN), non-finite -> 0x80, 240 and 57344 are their largest
  assert bits([-0.0, -2.0 ** -30, np.inf, np.nan, 1e6, -1e6, 240.0], "float8_e4m3fnuz") == [0, 0, 0x80, 0x80, 0x7F, 0xFF, 0x7F]
  assert bits([57344.0, 1e9, -0.0], "float8_e5m2fnuz") == [0x7F, 0x7F, 0]


def test_a_planted_non_saturating_conversion_is_caught():
  # the adversary: ml_dtypes' own cast (what the reference would give without to_saturating) differs
  xs = np.array([1000.0, -1e6])
  assert xs.astype(NP["float8_e4m3"]).view(np.uint8).tolist() != to_saturating(xs, "float8_e4m3").view(np.uint8).tolist()


@pytest.mark.parametrize("name", FLOAT8)
def test_a_sum_past_the_largest_finite_saturates(name):
  # a tensor-level REDUCE accumulates in float32 and rounds once, saturating (not inf or NaN)
  top = DTYPES[name].normal_range[1]
  bld = Builder()
  x = bld.buffer((4,), name, 0)
  bld.add("REDUCE", x, arg={"op": "ADD", "axes": [0]})
  got = evaluate(bld.graph(), {0: np.array([top, top, top, -top / 2], NP[name])})["out0"].astype(np.float64)
  assert got.ravel().tolist() == [top]
