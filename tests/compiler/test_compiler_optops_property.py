"""Any legal list of OptOps keeps a kernel's results: a Hypothesis property over random
kernels (elementwise, reductions, gemm and broadcast shapes, padded and permuted reads)
and random OptOp lists built from every action the tables allow (compiler.beam.actions
with every=True: SPLIT to each AxisType, PADTO, SWAP, and NOLOCALS), each kept only when
the optimizer accepts it; the compiled program must equal the reference evaluator.
Inputs are small integers (as float32 or int32), so every reduction is exact in any
order. A few examples run by default; TINYSPEC_OPT_EXAMPLES=N runs more."""
from __future__ import annotations
import os
import numpy as np
from hypothesis import given, settings, HealthCheck, strategies as st
from tinyspec.tensor import Tensor
from tinyspec.compiler import compile_graph, CompileError
from tinyspec.compiler.passes import callify, rangeify
from tinyspec.compiler.beam import actions, legal
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.device import device
from tinyspec.refimpl import evaluate

from targets import needs_cl
EXAMPLES = int(os.environ.get("TINYSPEC_OPT_EXAMPLES", "8"))
SIZES = [1, 2, 3, 4, 5, 6, 8, 12, 16]


@st.composite
def programs(draw):
  """(tensor, description): a small program over integer-valued inputs."""
  rng = np.random.default_rng(draw(st.integers(0, 2**16)))
  dt = draw(st.sampled_from([np.float32, np.float32, np.int32]))
  def data(*shape): return Tensor(rng.integers(-3, 4, shape).astype(dt))
  kind = draw(st.sampled_from(["elementwise", "reduce", "gemm", "broadcast", "pad", "permute"]))
  shape = tuple(draw(st.lists(st.sampled_from(SIZES), min_size=1, max_size=3)))
  if kind == "gemm":
    M, K, N = (draw(st.sampled_from(SIZES)) for _ in range(3))
    a, b = data(M, K), data(K, N)
    return (a.reshape(M, K, 1) * b.reshape(1, K, N)).sum(1), kind
  a, b = data(*shape), data(*shape)
  op = draw(st.sampled_from(["add", "mul", "max"]))
  x = a + b if op == "add" else a * b if op == "mul" else a.maximum(b)
  if kind == "elementwise": return x, kind
  if kind == "reduce":
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    return (x.sum(tuple(axes)) if draw(st.booleans()) else x.max(tuple(axes))), kind
  if kind == "broadcast":
    row = data(shape[-1])
    return (x * row).sum(len(shape) - 1) if draw(st.booleans()) else x + row, kind
  if kind == "pad":
    p = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    y = x.pad(p)
    return (y.sum(0) if draw(st.booleans()) else y), kind
  perm = draw(st.permutations(range(len(shape))))
  return x.permute(*perm) + 1, kind


def random_opts(sink, target: str, choose) -> list:
  """A random legal OptOp list for one kernel: actions drawn one at a time (`choose`
  picks an index), each kept only when the optimizer accepts the list with it."""
  dev = device(target)
  opts: list = [["NOLOCALS"]] if choose(4) == 0 else []
  cur = legal(sink, opts, target, dev)
  for _ in range(choose(5)):
    acts = actions(cur, target, dev, every=True)
    if not acts: break
    new = opts + [acts[choose(len(acts))]]
    nxt = legal(sink, new, target, dev)
    if nxt is not None: opts, cur = new, nxt
  return opts


def check(target: str, prog, data):
  t, kind = prog
  g, inputs = t.graph(), t.inputs()
  want = evaluate(g, inputs)
  kernels = rangeify.rangeify(callify.callify(g.root_uops())).kernels
  choose = lambda n: data.draw(st.integers(0, n - 1)) if n > 1 else 0
  opts = {k.name: random_opts(k.sink, target, choose) for k in kernels}
  try:
    got = compile_graph(g, target, opts, keep_stages=False).run(inputs)
  except CompileError as e:
    raise AssertionError(f"legal opts {opts} refused: {e}") from None
  bad = compare_outputs(got, want)
  assert not bad, f"{kind} with {opts}: {bad}\ngraph: {[(n.op, n.arg) for n in g.nodes]}\ninputs: {inputs}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.data())
def test_legal_opts_keep_results_c(prog, data):
  check("c", prog, data)


@needs_cl
@settings(max_examples=max(2, EXAMPLES // 2), deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.data())
def test_legal_opts_keep_results_opencl(prog, data):
  check("opencl", prog, data)
