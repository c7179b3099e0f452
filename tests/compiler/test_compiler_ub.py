"""No C undefined behaviour reaches a kernel: the op-coverage kernels (every op on the
edge values of its dtypes: overflowing sums and products, shifts by the width and more,
division by zero and MIN/-1, out-of-range float->int casts) rebuilt with UBSan and
*without* -fwrapv report nothing, and still match the reference.

Float division by zero is not checked: IEEE 754 defines it (C Annex F; decision
float-div-zero), and the kernels rely on it.
"""
from __future__ import annotations
import shutil
import subprocess
import pytest
from tinyspec.compiler import compile_graph
from tinyspec.compiler.check import compare
from tinyspec.props import props
from test_compiler_ops import op_graph

SANITIZE = "-fno-wrapv -fsanitize=undefined,float-cast-overflow -fsanitize-recover=all"


def _ubsan_works() -> bool:
  """Can the C compiler the runtime uses ($CC, else cc) build a shared library with UBSan
  that loads (clang's needs its runtime linked in; GCC's links libubsan)?"""
  import ctypes
  import os
  import tempfile
  cc = shutil.which(os.environ.get("CC") or "cc")
  if cc is None: return False
  with tempfile.TemporaryDirectory() as d:
    so = os.path.join(d, "t.so")
    r = subprocess.run([cc, "-fsanitize=undefined", "-shared", "-fPIC", "-x", "c", "-", "-o", so], input="int f(int x){return x+1;}",
                       capture_output=True, text=True)
    if r.returncode != 0: return False
    try: ctypes.CDLL(so)
    except OSError: return False
  return True


@pytest.mark.skipif(not _ubsan_works(), reason="the C compiler cannot build with -fsanitize=undefined")
@pytest.mark.parametrize("dt", ["int8", "int32", "int64", "uint16", "uint64", "index", "float16", "bfloat16", "float32", "float64"])
def test_no_undefined_behaviour(dt, monkeypatch, capfd):
  from tinyspec.refimpl import evaluate
  monkeypatch.setenv("TINYSPEC_CFLAGS", SANITIZE)
  roots, names, inputs = op_graph(dt)
  got = compile_graph(roots, "c", keep_stages=False).run(inputs)
  err = capfd.readouterr().err
  assert "runtime error" not in err, err[:2000]
  want = evaluate(roots, inputs)
  for k, name in enumerate(names):
    if props(roots[k]).dtype in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "index") or name.startswith("CAST"):
      assert compare(got[f"out{k}"], want[f"out{k}"], props(roots[k]).dtype) is None, name
