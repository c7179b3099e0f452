"""Split reductions (compiler/passes/split.py): on OpenCL a long reduce with few outputs becomes
a kernel of partials over the device's compute units and a kernel combining them. The
split schedule evaluates (refimpl) to the same values as the program; reduces that must
keep their order, short ones and C programs are left whole. Devices are given explicitly
so that the choices do not depend on the machine."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.tensor import Tensor
from tinyspec.validate import validate
from tinyspec.compiler.passes import callify, rangeify
from tinyspec.compiler.check import compare_outputs
from tinyspec.props import props
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.device import Device
from tinyspec.compiler.passes.split import split_reduces
from tinyspec.refimpl import evaluate
from targets import needs_cl

CL_CPU = Device("opencl", "test cpu", "cpu", 2, 65536, 4096, False, 32)
CL_GPU = Device("opencl", "test gpu", "gpu", 16, 32768, 256, False, 16)
C_CPU = Device("c", "test cpu", "cpu", 2, 0, 0, False, 32)
RNG = np.random.default_rng(3)
N = 1 << 19


def ints(*shape, dtype=np.float32):
  return RNG.integers(-3, 4, shape).astype(dtype)     # float sums exact in any order


def schedule(t):
  return rangeify.rangeify(callify.callify(t.graph().root_uops()))


def check(t, dev, target="opencl"):
  """The split schedule: its graph validates and evaluates to the program's values."""
  before = schedule(t)
  after = split_reduces(before, target, dev)
  g = after.graph()
  res = validate(g)
  assert res.ok, [d.format() for d in res.diagnostics[:3]]
  want = evaluate(t.graph(), t.inputs())
  got = evaluate(g, t.inputs())
  assert not compare_outputs(got, want)
  return before, after


CASES = {
  "sum": lambda: Tensor(ints(N)).sum(),
  "max": lambda: Tensor(RNG.standard_normal(N).astype(np.float32)).max(),
  "sum then elementwise": lambda: Tensor(ints(N)).sum() * 2 + 1,
  "int sum": lambda: Tensor(ints(N, dtype=np.int32)).sum(),
  "row sums": lambda: Tensor(ints(4, N)).sum(1),
  "two axes": lambda: Tensor(ints(N // 64, 64)).sum(),
  "product of squares": lambda: (Tensor(ints(N)) * Tensor(ints(N))).sum(),
}


@pytest.mark.parametrize("dev", [CL_CPU, CL_GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("case", CASES)
def test_long_reduce_is_split_in_two_kernels(case, dev):
  before, after = check(CASES[case](), dev)
  assert len(after.kernels) == len(before.kernels) + 1
  part = [k for k in after.kernels if k.name.endswith("_partial")]
  assert len(part) == 1
  # compute units x the table's factor groups (a divisor of the reduce)
  per_unit = render_tables()["heuristics"][dev.kind]["split_reduce"]["opencl"]
  partials = [u for u in after.intermediates if u in part[0].args][0]
  assert props(partials).shape[-1] == dev.threads * per_unit


def _two_reduces_of_one_input():
  x = Tensor(ints(N))
  return x.sum() + x.max()


@pytest.mark.parametrize("t, why", [
  (lambda: Tensor(ints(1000)).sum(), "short"),
  (lambda: Tensor(ints(64, 8192)).sum(1), "many outputs, short reduce"),
  (lambda: Tensor(RNG.uniform(0.999, 1.001, N).astype(np.float32)).prod(), "float MUL keeps its order"),
  (_two_reduces_of_one_input, "two reduces in one kernel"),
  (lambda: Tensor(ints(N, dtype=np.float16)).sum(), "16-bit float partials would round"),
])
def test_left_whole(t, why):
  before = schedule(t())
  if why == "two reduces in one kernel":
    assert any(sum(u.op == "REDUCE" for u in k.sink.toposort()) == 2 for k in before.kernels)
  after = split_reduces(before, "opencl", CL_CPU)
  assert [k.name for k in after.kernels] == [k.name for k in before.kernels], why


def test_c_keeps_one_kernel():
  """C splits a long reduce over threads inside one kernel (GROUP_REDUCE): no partials kernel."""
  s = schedule(Tensor(ints(N)).sum())
  assert split_reduces(s, "c", C_CPU) is s


@needs_cl
def test_compiled_split_matches_reference():
  """End to end on the OpenCL device: the program has the partials kernel and the
  reference's values (an integer sum: exact in any order)."""
  from tinyspec.compiler import compile_graph
  t = Tensor(ints(N, dtype=np.int32)).sum() * 3
  c = compile_graph(t.graph(), "opencl")
  assert any(s.name.endswith("_partial") for s in c.sources)
  assert not compare_outputs(c.run(t.inputs()), evaluate(t.graph(), t.inputs()))
  from tinyspec.compiler.check import check_stages
  check_stages(t.graph(), t.inputs(), target="opencl", compiled=c)
