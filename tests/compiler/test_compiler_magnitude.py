"""The launch-time scan a contraction guard asks (compiler/runtime/magnitude.py): the
largest finite |x| of a host buffer (and of an OpenCL buffer, on its device), for every float dtype, whatever its length (64-byte
vectors, then a scalar tail; long buffers in slices on threads) and wherever its
infinities, NaNs, signed zeros, subnormals and largest values lie. Checked against NumPy."""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinyspec.compiler.runtime.c import largest_finite, SCAN_SLICE
from targets import needs_cl

FLOATS = ["float16", "bfloat16", "float32", "float64"]
BITS = {"float16": np.uint16, "bfloat16": np.uint16, "float32": np.uint32, "float64": np.uint64}


def as_float64(bits: np.ndarray, dt: str) -> np.ndarray:
  """The values of a buffer's bits, in float64 (bfloat16: the top half of a float32)."""
  with np.errstate(invalid="ignore"):     # (a signalling NaN, quieted)
    if dt == "bfloat16": return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.dtype(dt)).astype(np.float64)


def want(bits: np.ndarray, dt: str) -> float:
  v = np.abs(as_float64(bits, dt))
  v = v[np.isfinite(v)]
  return float(v.max()) if v.size else 0.0


def special_bits(dt: str) -> list[int]:
  """+-0, the smallest subnormal, +-1, the largest finite value, +-inf, quiet and signalling NaNs."""
  from tinyspec.dtypes import dtype
  D = dtype(dt)
  sign, inf = 1 << (D.bits - 1), ((1 << D.exponent) - 1) << D.mantissa
  one = ((1 << (D.exponent - 1)) - 1) << D.mantissa
  return [0, sign, 1, one, sign | one, inf - 1, sign | (inf - 1), inf, sign | inf, inf | (1 << (D.mantissa - 1)), inf | 1, sign | inf | 3]


@settings(max_examples=150, deadline=None)
@given(dt=st.sampled_from(FLOATS), n=st.sampled_from([0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200]),
       seed=st.integers(0, 2 ** 32 - 1), specials=st.integers(0, 6))
def test_largest_finite_matches_numpy(dt, n, seed, specials):
  rng = np.random.default_rng(seed)
  U = BITS[dt]
  bits = rng.integers(0, np.iinfo(U).max, n, dtype=U, endpoint=True)
  for _ in range(specials if n else 0):      # anywhere: the vector body or the scalar tail
    bits[rng.integers(0, n)] = rng.choice(special_bits(dt))
  assert largest_finite([(bits.ctypes.data, dt, n)]) == [want(bits, dt)]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_long_buffers_in_slices(dt, threads):
  """Longer than a slice per thread: the slices' maxima combine, the largest value found
  wherever it is (first element, last element, a slice boundary); infinities skipped."""
  n = 7 * SCAN_SLICE + 5
  U = BITS[dt]
  one = special_bits(dt)[3]
  for where in (0, n - 1, SCAN_SLICE, n // 3, 2 * (n // 3) - 1):
    bits = np.full(n, one, U)
    bits[::1000] = special_bits(dt)[7]          # +inf
    bits[where] = one + 5                       # a little more than 1
    assert largest_finite([(bits.ctypes.data, dt, n)], threads) == [want(bits, dt)] and want(bits, dt) > 1


def test_every_special_value_alone():
  for dt in FLOATS:
    for b in special_bits(dt):
      x = np.array([b], BITS[dt])
      assert largest_finite([(x.ctypes.data, dt, 1)]) == [want(x, dt)], (dt, hex(b))


def test_several_buffers_in_one_scan():
  """One call scans every buffer a guard names, their slices mixed on the threads: each
  gets its own maximum."""
  rng = np.random.default_rng(1)
  bufs = [rng.standard_normal(n).astype(d) * s for n, d, s in ((5 * SCAN_SLICE + 3, np.float32, 1e3), (17, np.float64, 1e-300),
                                                              (2 * SCAN_SLICE, np.float16, 10), (0, np.float32, 1))]
  bufs[0][-1] = np.inf
  args = [(b.ctypes.data, np.dtype(b.dtype).name, b.size) for b in bufs]
  want_ = [float(np.abs(b[np.isfinite(b)]).max(initial=0)) for b in bufs]
  for threads in (1, 2, 5):
    assert largest_finite(args, threads) == want_


@needs_cl
@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
def test_the_opencl_scan_matches_numpy(dt):
  """The device's scan (a strided share per work item, a tree per work-group, a value per
  group read back): every length, infinities, NaNs and the largest value anywhere."""
  import pyopencl as cl
  from tinyspec.compiler.runtime.opencl import device, largest_finite_cl
  ctx, _, _ = device()
  rng = np.random.default_rng(3)
  for n in (0, 1, 2, 255, 256, 257, 10007):
    x = (rng.standard_normal(n) * 100).astype(dt)
    for where in {0, n // 2, n - 1} if n else ():
      y = x.copy()
      y[where] = np.finfo(dt).max
      if n > 3: y[(where + 1) % n], y[(where + 2) % n] = np.inf, np.nan
      buf = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=y)
      assert largest_finite_cl([(buf, dt, n)]) == [float(np.finfo(dt).max)], (n, where)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x if n else np.zeros(1, dt))
    assert largest_finite_cl([(buf, dt, n)]) == [float(np.abs(x).max(initial=0))], n
