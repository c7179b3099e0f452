"""No compiled kernel reads or writes memory it does not own: kernels built with
AddressSanitizer (GCC's, its runtime preloaded into a child Python) run with OptOps that
move memory around -- LOCAL scratch of a GROUP_REDUCE that is not threaded (once freed
at bind's return: a heap use-after-free found under BEAM; NumPy caches small blocks, so
only a kernel with many scratch buffers shows it), threaded groups, register
tiles with packed inputs, PADTO masks, padded tiles storing into padded copies -- and an out-of-range gather and scatter, which
must be guarded (decision index-oob). ASan reports any access outside a live allocation.
"""
from __future__ import annotations
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import numpy as np
from tinyspec.uop import UOp
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.literals import shape_operand as S
from tinyspec.refimpl import evaluate

A = UOp("BUFFER", (S((64, 48)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
SUMSQ = UOp("REDUCE", (UOp("MUL", (A, A)),), {"op": "ADD", "axes": [1]})
TOTAL = UOp("REDUCE", (UOp("MUL", (A, A)),), {"op": "ADD", "axes": [0, 1]})
X = {"buf0": np.random.default_rng(1).integers(-4, 5, (64, 48)).astype(np.float32)}
cases = [
  ([SUMSQ], [["SPLIT", 1, [8, "GROUP_REDUCE", False]]]),
  # 16 scratch buffers of one size: more than NumPy keeps in its small-block cache, so
  # freeing them early reaches free() and ASan sees the kernel write into freed memory
  ([SUMSQ], [["SPLIT", 0, [16, "UPCAST"]], ["SPLIT", 1, [2, "GROUP_REDUCE", False]]]),
  ([TOTAL], [["SPLIT", 0, [8, "GROUP_REDUCE", True]], ["SPLIT", 1, [4, "UNROLL"]]]),
  ([SUMSQ], [["PADTO", 0, 48], ["SPLIT", 0, [4, "THREAD"]]]),
  ([SUMSQ], [["PADTO", 1, 64], ["SPLIT", 1, [16, "UNROLL"]]]),
  ([SUMSQ], None),
]
for roots, opts in cases:
  c = compile_graph(roots, "c", opts, keep_stages=False)
  bound = c.executable().bind(X)
  import gc; gc.collect()
  for _ in range(2): bound.run()
  assert not compare_outputs(bound.outputs(), evaluate(roots, X)), opts

# a gemm through the default heuristics (register tile, packed input, threads)
rng = np.random.default_rng(0)
a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
t = (Tensor(a).reshape(128, 64, 1) * Tensor(b).reshape(1, 64, 96)).sum(1)
got = compile_graph(t.graph(), "c", keep_stages=False).run(t.inputs())["out0"]
assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-4)
# ... and one whose sizes no tile divides (padded input copies, a padded product, the copy back)
for M, K, N in ((131, 67, 97), (9, 300, 250)):
  a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  t = (Tensor(a).reshape(M, K, 1) * Tensor(b).reshape(1, K, N)).sum(1)
  c = compile_graph(t.graph(), "c", keep_stages=False)
  assert any(k.name.endswith("_unpad0") for k in c.schedule.kernels), [k.name for k in c.schedule.kernels]
  got = c.run(t.inputs())["out0"]
  assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-4)

# gather and scatter through out-of-range indices: reads zero, writes nothing
src = UOp("BUFFER", (S((10,)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
idx = UOp("BUFFER", (S((6,)),), {"slot": 1, "dtype": "int32", "device": "CPU"})
gather = UOp("INDEX", (src, idx))
inputs = {"buf0": np.arange(10, dtype=np.float32), "buf1": np.array([0, 9, 10, -1, 1 << 30, -(1 << 30)], np.int32)}
got = compile_graph([gather], "c", keep_stages=False).run(inputs)
assert not compare_outputs(got, evaluate([gather], inputs))
print("asan-clean")
'''


def _libasan() -> str | None:
  """GCC's ASan runtime, when the compiler the runtime uses is GCC and has one."""
  cc = shutil.which(os.environ.get("CC") or "cc")
  if cc is None: return None
  r = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
  path = r.stdout.strip()
  return path if r.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


@pytest.mark.skipif(_libasan() is None, reason="no GCC AddressSanitizer runtime to preload")
def test_kernels_stay_inside_their_memory(tmp_path):
  env = dict(os.environ, LD_PRELOAD=_libasan(), ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
             TINYSPEC_CFLAGS="-fsanitize=address -fno-omit-frame-pointer", TINYSPEC_CACHE=str(tmp_path),
             PYTHONPATH=str(ROOT))
  r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert "AddressSanitizer" not in r.stderr, r.stderr[-4000:]
  assert r.returncode == 0 and "asan-clean" in r.stdout, r.stderr[-4000:]
