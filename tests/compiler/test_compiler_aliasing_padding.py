"""Padded outputs, padded inputs, contraction and arguments that share memory, each from
a minimal graph (tests/compiler/aliasing_padding_cases.py), on c and opencl: the compiled result
is the reference's bit for bit; on c, built with AddressSanitizer and
UndefinedBehaviorSanitizer in a child process, no kernel touches memory it does not
own. Where the fix is a decision of the compiler (no padded copy, a snapshot, a private
copy, no fused multiply-add) a test says so directly."""
from __future__ import annotations
import os
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from tinyspec.compiler import compile_graph
from tinyspec.props import props
from aliasing_padding_cases import CASES, agree, gather_gemm, alias, padded_row, view_store
from targets import TARGETS, HAVE_CL
from test_compiler_asan import _libasan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_agrees_with_the_reference(name, target):
  assert agree(name, target) is None


def _bytes(u) -> int:
  from tinyspec.intervals import np_dtype
  return int(np.prod(props(u).shape)) * np_dtype(props(u).dtype).itemsize


@pytest.mark.skipif(not HAVE_CL, reason="no OpenCL device")
@pytest.mark.parametrize("dt", ["uint8", "int16", "uint16", "uint32", "int64", "uint64"])
def test_padding_is_sized_by_the_loops(dt):
  """PoCL's tile pads the gemm's 33 x 50 output to 40 x 64: the index buffer is padded to
  40 rows and w to 64 columns, the gathered matrix x not at all (its reads stay guarded):
  no intermediate holds more than the padded w (64 x 64), whatever idx's dtype could
  index (sized by that, a uint16 index would pad x to 65536 rows, a uint32 one to 2^32)."""
  g, _ = gather_gemm(dt)
  c = compile_graph(g, "opencl", keep_stages=False)
  assert any(k.name.endswith("_unpad0") for k in c.schedule.kernels)      # the case does pad
  assert max(_bytes(u) for u in c.schedule.intermediates) <= 64 * 64 * 4


def test_a_partial_store_is_not_padded():
  """The row kernel's store reaches one row of four: no padded intermediate, no copy."""
  for g in (padded_row()[0], padded_row(True)[0]):
    c = compile_graph(g, "c", keep_stages=False)
    assert not any("unpad" in k.name for k in c.schedule.kernels)


def test_aliased_arguments_get_snapshots_and_private_copies():
  """CALL(reverse, B, B): the read slot reads a snapshot of B taken before the kernel.
  Two written slots on one buffer: each writes a private copy, copied back in slot order."""
  c = compile_graph(alias("same")[0], "c", keep_stages=False)
  assert [k.name.split("_")[0] for k in c.schedule.kernels] == ["snapshot", "user"]
  c = compile_graph(alias("writers")[0], "c", keep_stages=False)
  names = [k.name for k in c.schedule.kernels]
  assert names[:2] == ["private_user_kernel0_0", "private_user_kernel0_1"] and names[-2:] == ["private_user_kernel0_0_out", "private_user_kernel0_1_out"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_store_through_a_view_is_the_buffers_output_and_its_stages_agree(target):
  from tinyspec.compiler.check import check_stages
  for form in ("root", "read", "overlap", "whole"):
    g, inputs = view_store(form)
    check_stages(g, inputs, target)


OCLGRIND = r'''
import json, sys
import numpy as np
from aliasing_padding_cases import CASES, GPU_CASES
from tinyspec.refimpl import evaluate
from tinyspec.compiler import compile_graph, CompileError
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.device import table_device
from tinyspec.compiler.runtime.opencl import device
try: name = device()[2].name
except Exception as e: name = f"none ({type(e).__name__}: {e})"
if "oclgrind" not in name.lower(): print(json.dumps({"unavailable": name})); sys.exit(0)
bad = []
for table in ("h100", "a100", "mi250"):
  for case, (make, ulp) in {**{n: (f, 0) for n, f in CASES.items()}, **GPU_CASES}.items():
    g, inputs = make()
    print(f"== {case} {table}", file=sys.stderr, flush=True)
    want = evaluate(g, inputs)
    try: got = compile_graph(g, "opencl", keep_stages=False, device=table_device(table)).run(inputs)
    except CompileError as e:     # run.oclgrind: Oclgrind reported the run (its report on stderr, under the case)
      if e.rule != "run.oclgrind": raise
      print(e, file=sys.stderr); bad.append([case, table, "run.oclgrind"]); continue
    if (m := compare_outputs(got, want, default_ulp=ulp)): bad.append([case, table, m])
print(json.dumps({"bad": bad}))
'''


def test_every_case_runs_on_oclgrind_for_every_table():
  """Each case above and the GPU tables' own (rows of 2^k + 1 work items, a gemm of 13
  rows), compiled for the H100, A100 and MI250X tables, run on the Oclgrind simulator
  with its race detector: the reference's outputs, no race, no access out of bounds."""
  import json
  env = dict(os.environ, TINYSPEC_OPENCL_DEVICE="Oclgrind", OCLGRIND_DATA_RACES="1",
             PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "compiler"), str(ROOT / "tests" / "support"), str(ROOT)]))
  r = subprocess.run([sys.executable, "-c", OCLGRIND], env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
  assert r.returncode == 0, r.stderr[-4000:]
  out = json.loads(r.stdout.strip().splitlines()[-1])
  if "unavailable" in out: pytest.skip(f"Oclgrind does not open as an OpenCL device (TINYSPEC_OPENCL_DEVICE=Oclgrind: {out['unavailable']})")
  assert out["bad"] == []
  reports, case = [], None
  for line in r.stderr.splitlines():
    if line.startswith("== "): case = line[3:]
    elif ("data race" in line or "Invalid" in line) and case not in reports: reports.append(case)
  assert reports == [], r.stderr[-4000:]


CHILD = r'''
from aliasing_padding_cases import CASES, agree
bad = [(n, m) for n in sorted(CASES) if (m := agree(n, "c")) is not None]
assert not bad, bad
print("sanitizers-clean")
'''


@pytest.mark.skipif(_libasan() is None, reason="no GCC AddressSanitizer runtime to preload")
def test_no_sanitizer_report(tmp_path):
  env = dict(os.environ, LD_PRELOAD=_libasan(), ASAN_OPTIONS="detect_leaks=0:halt_on_error=0",
             UBSAN_OPTIONS="print_stacktrace=0", TINYSPEC_CACHE=str(tmp_path),
             TINYSPEC_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fno-wrapv",
             PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "compiler"), str(ROOT / "tests" / "support"), str(ROOT)]))
  r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-4000:]
  assert r.returncode == 0 and "sanitizers-clean" in r.stdout, r.stderr[-4000:]
