"""The float32 EXP2 helper of CPUs (spec/render.yaml helpers exp2_f32) against the
correctly rounded reference: both of its paths, the float polynomial in fused
multiply-adds (where fma is fast: __FP_FAST_FMAF) and the double one (built with that
macro undefined), through the real pipeline, on a strided sample of every float32 in
the interesting range plus the neighbourhoods where it is hardest (integers and
half-integers: the reduction's rounding boundary; the overflow and subnormal ends) and
the special values. The strict profile's bound (ops.yaml tolerances EXP2: 1 ulp) holds
everywhere; NaN, +-inf and the ends are exact."""
from __future__ import annotations
import subprocess
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.compiler import compile_graph
from tinyspec.compiler.literals import shape_operand
from tinyspec.compiler.runtime.c import _compiler
from tinyspec.refimpl import crmath
from tinyspec.tolerance import ulp_distance, tolerance

from targets import TARGETS


def _sample() -> np.ndarray:
  # every 1009th float32 bit pattern of each sign up to |x| = 160 (past both ends: 129, -151)
  top = int(np.float32(160).view(np.uint32))
  pos = np.arange(0, top, 1009, dtype=np.uint32).view(np.float32)
  edges = np.arange(-160, 161, 0.5, dtype=np.float32)      # integers and half-integers
  near = edges.view(np.int32)[:, None] + np.arange(-48, 49, dtype=np.int32)[None, :]
  near = near.ravel().view(np.float32)
  special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 128, np.nextafter(128, 0), 127.5,
                      -126, -149, -150, -150.5, -151, np.nextafter(-151, 0), -152, 1e-30, -1e-30,
                      np.finfo(np.float32).max, -np.finfo(np.float32).max,
                      np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal], np.float32)
  return np.concatenate([pos, -pos, near, special]).astype(np.float32)


def _fast_fma_defined(extra: list[str]) -> bool:
  """Whether the C compiler, with the runtime's flags plus `extra`, predefines __FP_FAST_FMAF
  (math.h's FP_FAST_FMAF follows it): which path of the helper the build takes."""
  out = subprocess.run(_compiler() + extra + ["-dM", "-E", "-x", "c", "-"], input="", capture_output=True, text=True, timeout=60).stdout
  return "__FP_FAST_FMAF " in out


def _run(x: np.ndarray, target: str) -> np.ndarray:
  b = UOp("BUFFER", (shape_operand(x.shape),), {"slot": 0, "dtype": "float32", "device": "CPU"})
  c = compile_graph([UOp("EXP2", (b,))], target, keep_stages=False)
  if target != "c":
    src = c.source()
    if "exp2_f32(" not in src: pytest.skip("the OpenCL device is a GPU: EXP2 is its builtin there")
  return np.asarray(c.run({"buf0": x})["out0"])


def _check(x: np.ndarray, got: np.ndarray):
  want = crmath.exp2(x.astype(np.float64), fmt="float32").astype(np.float32)
  bound, _ = tolerance("EXP2", "float32")
  d = ulp_distance(got, want)
  bad = np.flatnonzero(~(d <= bound))
  assert bad.size == 0, [(float(x[i]), float(got[i]), float(want[i]), float(d[i])) for i in bad[:8]]
  # the ends and the special values are exact, a NaN comes back with its own bits
  nan = np.isnan(x)
  exact = ~nan & ((x >= 128) | (x <= -151) | (x == 0))
  assert np.array_equal(got[exact], want[exact])
  assert np.array_equal(got[nan].view(np.uint32), x[nan].view(np.uint32))


@pytest.mark.parametrize("path", ["fma", "double"])
def test_the_c_helper_is_within_one_ulp_on_both_paths(path, monkeypatch):
  extra = [] if path == "fma" else ["-U__FP_FAST_FMAF"]
  if path == "fma" and not _fast_fma_defined([]):
    pytest.skip("this host's C compiler has no fast fma (__FP_FAST_FMAF): the double path is the only one")
  assert _fast_fma_defined(extra) == (path == "fma")
  monkeypatch.setenv("TINYSPEC_CFLAGS", " ".join(extra))
  x = _sample()
  assert x.size > 2_000_000
  _check(x, _run(x, "c"))


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "c"])
def test_the_opencl_cpu_helper_is_within_one_ulp(target):
  x = _sample()
  _check(x, _run(x, target))


def test_a_planted_coefficient_error_is_caught(monkeypatch):
  """The sample finds a helper a few ulp off: the polynomial's quadratic coefficient with
  two digits swapped (what a typo in the table would do)."""
  from tinyspec.compiler import rendertables as tables
  if not _fast_fma_defined([]): pytest.skip("no fast fma here: the planted path is not built")
  T = tables.render_tables()
  good = T["helpers"]["exp2_f32"]
  bad = good.replace("2.402264476e-1f", "2.402246476e-1f")   # two digits swapped
  assert bad != good
  monkeypatch.setitem(T["helpers"], "exp2_f32", bad)
  x = _sample()
  with pytest.raises(AssertionError):
    _check(x, _run(x, "c"))
