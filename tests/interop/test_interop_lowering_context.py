"""A captured kernel's program is the program tinygrad ran, lowered in the context tinygrad
lowered it in (issue 31; the suite's program-of-emulated-bfloat16 and capture-emulated-fp8):

  * tinygrad's tests run under `Context(EMULATED_DTYPES=...)`; the suite imports each
    schedule after the test, outside that context. The capture records tinygrad's lowering
    context with each call, and the program graph is lowered in it: an emulated bfloat16
    kernel's program holds bfloat16 as uint16 storage (as it ran), never `__bf16`;
  * tinygrad's fp8s are the spec's float8 dtypes (decision fp8-convert): the capture reads
    their buffers (it once raised KeyError: None on them), and every graph of an emulated fp8
    program, tensor, kernel and lowered program, imports, validates and agrees.

Each runs on tinygrad's CPU device where clang is on PATH, else on its PYTHON device: the
emulation is tinygrad's renderer-independent lowering, so both show it.
"""
import os
import shutil
import numpy as np
import pytest

os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
pytest.importorskip("tinygrad")

from tinygrad import Context, Device, Tensor, dtypes   # noqa: E402
from tinygrad.codegen import to_program   # noqa: E402
from tinyspec.interop import script   # noqa: E402
from tinyspec.interop.capture import capture, read_buffer   # noqa: E402
from tinyspec.interop.suite.check import schedule_record   # noqa: E402


def _captured(dtype, emulated: str, a: list, b: list, f=lambda x, y: x * y + x):
  """(the realizations, tinygrad's result bits) of f(a, b) in dtype, run under Context(EMULATED_DTYPES=emulated)."""
  with capture() as cap:
    with Context(EMULATED_DTYPES=emulated):
      x, y = Tensor(a, dtype=dtype), Tensor(b, dtype=dtype)
      got = f(x, y).realize()
      bits = got.bitcast(dtypes.uint16 if dtype.itemsize == 2 else dtypes.uint8).tolist()
  return [r for r in cap.realizations if r.calls], bits


def _program_dtypes(graph) -> set:
  return {n.arg["dtype"] for n in graph.nodes if n.op == "PARAM" and isinstance(n.arg, dict) and "slot" in n.arg}


def test_emulated_bfloat16_program_is_lowered_in_the_recorded_context():
  realizations, bits = _captured(dtypes.bfloat16, "bfloat16", [1.5, -2.25, 3.0, 0.1], [2.0, 0.5, 7.0, -3.0])
  assert bits == [0x4090, 0xC058, 0x41C0, 0xBE4D]   # 4.5, -3.375, 24.0, 0.1*-3+0.1 in bfloat16
  kernels = [(r, c) for r in realizations for c in r.calls if c.kind == "SINK"]
  assert kernels and all(c.lowering["EMULATED_DTYPES"] == "bfloat16" for _, c in kernels)
  for r, c in kernels:   # imported here, outside the test's Context, as the suite's plugin does after a test
    k = script._kernel_graph(r, c)
    p = script.program_graph(r, c, k, c.program()).check()
    assert "bfloat16" in _program_dtypes(k.graph), k.name
    assert "bfloat16" not in _program_dtypes(p.graph) and "uint16" in _program_dtypes(p.graph), (p.name, _program_dtypes(p.graph))
    assert p.valid and p.eval_ok, (p.name, p.diagnostics, p.evaluation)
  for r in realizations:   # the suite's own path: every graph imported, valid and agreeing
    verdicts = schedule_record("bf16", r)["graphs"]
    assert all(v["stage"] == "ok" for v in verdicts), [(v["name"], v["stage"], v["error"][:200]) for v in verdicts]


def test_emulated_int64_program_reads_the_buffers_as_int32_pairs():
  """EMULATED_DTYPES=long: the program tinygrad ran holds each int64 as two int32 (twice the
  elements); its inputs and tinygrad's results are the kernel's buffers' bytes, so read."""
  with capture() as cap:
    with Context(EMULATED_DTYPES="long"):
      x, y = Tensor([2**40 + 3, -5, 2**63 - 1], dtype=dtypes.int64), Tensor([7, 2**33, 1], dtype=dtypes.int64)
      assert (x * y + x).tolist() == [8 * (2**40 + 3), -5 * 2**33 - 5, -2]   # int64 wraps
  kernels = [(r, c) for r in cap.realizations for c in r.calls if c.kind == "SINK"]
  for r, c in kernels:
    k = script._kernel_graph(r, c)
    p = script.program_graph(r, c, k, c.program()).check()
    assert _program_dtypes(p.graph) == {"int32"}, _program_dtypes(p.graph)
    assert all(p.inputs[n].size == 2 * a.size for n, a in k.inputs.items() if a.dtype == np.int64)
    assert p.valid and p.eval_ok, (p.name, p.diagnostics, p.evaluation)
  assert any("int64" in _program_dtypes(script._kernel_graph(r, c).graph) for r, c in kernels)


def test_the_lowering_context_is_the_one_tinygrad_ran_in():
  """Adversary: the context recorded is the realize's, not the importer's: a reduction run under
  NOOPT=1 (unoptimized) is lowered unoptimized when the importer's own context optimizes."""
  with capture() as cap:
    with Context(NOOPT=1):
      assert Tensor.arange(256).reshape(16, 16).float().sum(1).realize().tolist()[0] == 120.0
  calls = [c for r in cap.realizations for c in r.calls if c.kind == "SINK"]
  assert calls and all(c.lowering["NOOPT"] == 1 for c in calls)
  with Context(NOOPT=1): ran = [to_program(c.body, Device[c.device].renderer) for c in calls]
  with Context(NOOPT=0):
    programs = [c.program() for c in calls]
    optimized = [to_program(c.body, Device[c.device].renderer) for c in calls]   # what leaking the importer's context gives
  assert programs == ran
  assert optimized != ran   # the adversary sees the difference


def test_emulated_fp8_runs_under_the_capture_and_every_graph_imports_and_agrees():
  # x*y - x: tinygrad's SUB is an ADD of a MUL by a weak -1.0, which adopts the fp8 dtype (the importer raised KeyError on it)
  realizations, bits = _captured(dtypes.fp8e4m3, "fp8e4m3", [1.5, -0.5], [2.0, 4.0], lambda x, y: x * y - x)
  assert bits == [0x3C, 0xBC]   # 1.5, -1.5 in float8_e4m3, as tinygrad gives them without the capture
  _all_agree(realizations, "float8_e4m3")
  fp8 = [b for r in realizations for c in r.calls for b in c.buffers if b is not None and b.dtype == dtypes.fp8e4m3]
  assert fp8 and all(read_buffer(b).dtype.name == "float8_e4m3fn" for b in fp8)   # stored as ml_dtypes holds the encoding


def _all_agree(realizations, spec_dtype: str):
  """Every graph of every realization (tensor, kernel and program) imported, valid and
  agreeing with tinygrad's result; the tensor graphs hold the fp8 dtype itself."""
  held = set()
  for r in realizations:
    for v in schedule_record("fp8", r)["graphs"]:
      assert v["stage"] == "ok", (v["name"], v["stage"], v["error"][:300])
    held |= {n.dtype for n in script._tensor_graph(r).graph.nodes}
  assert spec_dtype in held, held


@pytest.mark.parametrize("dt,name", [(dtypes.fp8e4m3, "float8_e4m3"), (dtypes.fp8e5m2, "float8_e5m2"),
                                     (dtypes.fp8e4m3fnuz, "float8_e4m3fnuz"), (dtypes.fp8e5m2fnuz, "float8_e5m2fnuz")])
def test_fp8_casts_saturate_and_their_arithmetic_imports_and_agrees(dt, name):
  # a float32 -> fp8 CAST past the largest finite saturates (decision fp8-convert), then fp8 arithmetic and a sum
  emulated = dt.name.replace("float8_", "fp8")
  with capture() as cap:
    with Context(EMULATED_DTYPES=emulated):
      x = Tensor([1000.0, -1e6, 3.0, -0.75, 0.3, 7.0], dtype=dtypes.float32).cast(dt)
      y = Tensor([2.0, 0.5, -1.25, 4.0, 3.0, 0.1], dtype=dt)
      out = ((x * y + x) / y).realize(), x.sum().realize()
      got = [t.bitcast(dtypes.uint8).tolist() for t in out]
  top = {"float8_e4m3": 0x7E, "float8_e5m2": 0x7B}.get(name, 0x7F)   # the largest finite's bits
  assert got[0][0] & 0x7F == top or got[0][0] & 0x7F < top   # tinygrad's own result: finite
  _all_agree([r for r in cap.realizations if r.calls], name)


def test_an_emulated_fp8_comparison_of_a_subnormal_is_either_value_and_the_rest_are_judged():
  """tinygrad's test_emulated_fp8e4m3: 0 == -0.009765625 (a float8_e4m3 subnormal) is True
  under EMULATED_DTYPES, whose conversions flush subnormals (allowed: decision flush). The
  bound says that bool may be either value (its E is 1); the comparison of two normal
  operands stays judged exactly (interop/compare.py)."""
  from tinyspec.interop.compare import compare
  with capture() as cap:
    with Context(EMULATED_DTYPES="fp8e4m3"):
      a, b = Tensor([0.0, 0.0, 0.5], dtype=dtypes.fp8e4m3), Tensor([-0.009765625, 0.5, 0.5], dtype=dtypes.fp8e4m3)
      assert (a == b).tolist() == [True, False, True]   # flushed: the subnormal compares equal to 0
  tensor = [v for r in cap.realizations if r.calls for v in schedule_record("fp8", r)["graphs"] if v["level"] == "tensor"]
  assert tensor and all(v["stage"] == "ok" for v in tensor), tensor
  want, bound = np.array([True, False, True]), np.array([1.0, 0.0, 0.0])
  assert compare(want, np.array([False, False, True]), bound).ok   # the flip the bound allows
  assert not compare(want, np.array([True, True, True]), bound).ok   # a flip where the bound is 0: caught
