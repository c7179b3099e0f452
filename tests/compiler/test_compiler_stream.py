"""Streaming stores (render.yaml `streaming`): a C kernel writes an output at least the
host's last-level cache big, which it never reads, with non-temporal stores; the bits are
the same as a plain store's. The helper is tried on misaligned pointers and odd sizes,
is shown to fall back to memcpy under the sanitizers (whose checks must see the store),
and every kernel that streams fences before each return."""
from __future__ import annotations
import ctypes
import dataclasses
import re
import subprocess
import numpy as np
import pytest
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.device import device
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.runtime.c import _compiler


def _small_cache(nbytes: int):
  """The host's C device, told its last-level cache is nbytes (small graphs stream)."""
  return dataclasses.replace(device("c"), cache_bytes=nbytes)


def _compile(build, arrays, cache_bytes: int):
  ts = [Tensor(a) for a in arrays]
  t = build(*ts)
  return compile_graph(t.graph(), "c", device=_small_cache(cache_bytes)), t.inputs()


def _fences_before_returns(src: str) -> bool:
  """Every `return;` and the end of every function that streams follow a fence."""
  for fn in re.findall(r"\nvoid \w+\(void\*\* bufs.*?\n}\n", src, re.S):
    if "stream_store(" not in fn: continue
    lines = [ln.strip() for ln in fn.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
      if ln == "return;" and lines[i - 1] != "stream_fence();": return False
    if lines[-2] != "stream_fence();": return False
  return True


@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 16, 100_003])
def test_big_elementwise_output_streams_and_is_exact(n):
  rng = np.random.default_rng(n)
  a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  c, inputs = _compile(lambda a, b: a * b + a, (a, b), cache_bytes=1024)
  src = c.source()
  if n == 1 << 16: assert "stream_store(" in src and "vstore_floatx16(p0" not in src, src
  assert _fences_before_returns(src)
  out = c.run(inputs)["out0"]
  np.testing.assert_array_equal(out.view(np.uint32), (a * b + a).view(np.uint32))


def test_output_smaller_than_the_cache_is_stored_plainly():
  a = np.ones(4096, np.float32)
  c, _ = _compile(lambda a: a + a, (a,), cache_bytes=1 << 30)
  assert "stream_store(" not in c.source() and "stream_fence" not in c.source()


def test_opencl_never_streams():
  a = np.ones(1 << 16, np.float32)
  t = Tensor(a) + Tensor(a)
  c = compile_graph(t.graph(), "opencl", keep_stages=False)
  assert "stream_store(" not in c.source()


def _bench_cases():
  import sys
  from pathlib import Path
  sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
  import bench_kernels
  return list(bench_kernels.cases(np.random.default_rng(1), scale=256))


@pytest.mark.parametrize("case", _bench_cases(), ids=lambda c: c[0])
def test_benchmark_kernels_stream_fence_and_agree(case):
  """Every benchmark graph compiled as if the cache were tiny: whatever streams fences
  before each return, and the results are NumPy's within the case's tolerance."""
  name, arrays, build, expr, _, tol, _ = case
  c, inputs = _compile(build, arrays, cache_bytes=256)
  assert _fences_before_returns(c.source())
  got, want = c.run(inputs)["out0"], expr(*arrays)
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_streams_in_benchmark_kernels():
  """The elementwise cases and gemm's output tile stream once their outputs are big."""
  streamed = set()
  for name, arrays, build, *_ in _bench_cases():
    c, _ = _compile(build, arrays, cache_bytes=256)
    if "stream_store(" in c.source(): streamed.add(name.split()[0])
  assert {"add", "a*b+c", "gemm"} <= streamed, streamed


# ------------------------------------------------------------------ the helper itself
HARNESS = r"""
#include <stdint.h>
#include <string.h>
%s
void put(void* p, const void* v, int n) { stream_store(p, v, n); stream_fence(); }
int streams(void) {
#ifdef STREAM_X86
  return 1;
#else
  return 0;
#endif
}
"""


def _helper_text() -> str:
  return render_tables()["helpers"]["stream"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
  d = tmp_path_factory.mktemp("stream")
  (d / "h.c").write_text(HARNESS % _helper_text())
  cmd = [x for x in _compiler() if x != "-shared"] + ["-shared", str(d / "h.c"), "-o", str(d / "h.so")]
  subprocess.run(cmd, check=True, capture_output=True)
  return ctypes.CDLL(str(d / "h.so"))


@pytest.mark.parametrize("offset", [0, 4, 8, 16, 32, 48, 60])
@pytest.mark.parametrize("n", [4, 12, 16, 32, 48, 64, 128])
def test_stream_store_writes_exactly_n_bytes_at_any_alignment(harness, offset, n):
  buf = np.zeros(512, np.uint8)
  base = (-buf.ctypes.data) % 64          # a 64-byte aligned start inside buf
  src = np.arange(1, n + 1, dtype=np.uint8)
  harness.put(ctypes.c_void_p(buf.ctypes.data + base + offset), src.ctypes.data_as(ctypes.c_void_p), n)
  want = np.zeros(512, np.uint8)
  want[base + offset:base + offset + n] = src
  np.testing.assert_array_equal(buf, want)     # nothing before or after the n bytes


def test_helper_streams_on_x86(harness):
  import platform
  if platform.machine() not in ("x86_64", "AMD64", "i686"): pytest.skip("the stream intrinsics are x86's; elsewhere the helper is memcpy")
  assert harness.streams() == 1


@pytest.mark.parametrize("flag", ["-fsanitize=address", "-fsanitize=thread"])
def test_helper_is_a_plain_store_under_sanitizers(tmp_path, flag):
  """ASan/TSan do not instrument the intrinsics: under them the helper must be memcpy,
  which they check (the sanitizer fuzz proves the same addresses in bounds)."""
  src = tmp_path / "s.c"
  src.write_text("#include <stdint.h>\n#include <string.h>\n" + _helper_text() + "\n#ifdef STREAM_X86\n#error streams under a sanitizer\n#endif\n")
  cc = _compiler()[0]
  r = subprocess.run([cc, flag, "-march=native", "-fsyntax-only", str(src)], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
