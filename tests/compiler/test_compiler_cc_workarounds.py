"""C compiler bugs the renderer steers around (spec/render.yaml targets.c), each held by a
test that builds the failing pattern. GCC 12.2 (Debian 12's) turns a pair of
interleaved reads under one condition into masked vector loads and gets them wrong: a
sum of 6 int32 read as 8 in pairs (SPLIT/UNROLL 2, PADTO 8, which the optops property
test found) gave 29 or 1134 instead of -5, the extra lanes read past the buffer. Kernels
with a conditional read are compiled without loop if-conversion (GATED_LOADS)."""
from __future__ import annotations
import ctypes
import subprocess
import numpy as np
import pytest
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.runtime.c import _compiler

PAIRS = {"r": [["NOLOCALS"], ["SPLIT", 0, [2, "UNROLL"]], ["PADTO", 0, 8]]}


@pytest.mark.parametrize("dt", [np.int32, np.float32, np.int64])
@pytest.mark.parametrize("seed", range(4))
def test_gated_pairs_sum_exactly(dt, seed):
  rng = np.random.default_rng(seed)
  a = rng.integers(-3, 4, 6).astype(dt)
  b = rng.integers(-3, 4, 6).astype(dt)
  t = (Tensor(a) + Tensor(b)).sum()
  c = compile_graph(t.graph(), "c", PAIRS, keep_stages=False)
  assert "GATED_LOADS void" in c.source()
  for _ in range(3):
    assert c.run(t.inputs())["out0"] == (a + b).sum()


def test_kernels_without_conditional_reads_keep_if_conversion():
  """float MAX vectorizes through if-conversion: no GATED_LOADS there."""
  t = Tensor(np.ones(1 << 16, np.float32)).max()
  assert "GATED_LOADS void" not in compile_graph(t.graph(), "c", keep_stages=False).source()


PATTERN = r"""
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
%s
%s int32_t r(const int32_t* restrict p1) {
  int32_t acc0 = 0, acc1 = 0;
  for (int64_t r0 = 0; r0 < 8; r0++) {
    bool v1 = r0 < 3;
    acc0 += v1 ? p1[r0 * 2] : 0;
    acc1 += v1 ? p1[r0 * 2 + 1] : 0;
  }
  return acc0 + acc1;
}
"""


def test_the_workaround_fixes_the_pattern_on_this_compiler(tmp_path):
  """The bare pattern with the prelude's GATED_LOADS, built as kernels are: the right sum
  (without the attribute GCC 12.2 -march=native returns -5 for this input, not -3)."""
  prelude = render_tables()["targets"]["c"]["prelude"]
  (tmp_path / "p.c").write_text(PATTERN % (prelude, "GATED_LOADS"))
  cmd = _compiler() + ["-o", str(tmp_path / "p.so"), str(tmp_path / "p.c")]
  subprocess.run(cmd, check=True, capture_output=True)
  lib = ctypes.CDLL(str(tmp_path / "p.so"))
  a = np.array([2, 1, 0, -2, -1, -3], np.int32)
  assert lib.r(a.ctypes.data_as(ctypes.c_void_p)) == -3
