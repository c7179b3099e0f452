"""The reference evaluator is an optimization of the interpreter that defines a kernel
(refimpl/interpreter.py): both give the same bits, checked with Hypothesis on every kernel
form of

  * the corpus (conformance/cases: each kernel- and program-level case with its pinned
    inputs, then with drawn ones),
  * the fuzzer (conformance.strategies.graphs("kernel")) and the carried-loop kernels of
    tests/refimpl/test_refimpl_props.py (accumulators over 1-3 loops, scans, varying bounds),
  * tinygrad's own kernels: tests/refimpl/tinygrad_forms.py (REG accumulators over prime
    lengths, argmax, wrapping products, upcasts, cumsum, gather, conv, matmul) imported on
    the CPU device (where clang is installed) and on the PYTHON device (SPECIAL threads,
    MULACC), every kernel and program with the inputs tinygrad ran it on, then drawn ones;
  * hand-written forms tinygrad emits only at sizes the interpreter cannot run: the CPU
    device's threaded kernels (a core_id SPECIAL over rows).

And a bug planted in the vectorized path (an accumulator folded in the wrong order, an
integer product that does not wrap) is caught by the same property.
"""
from __future__ import annotations
import os
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from tinyspec.conformance.corpus.cases import load_cases
from tinyspec.conformance.strategies import arrays, graphs
from tinyspec.dispatch import input_name
from tinyspec.graph import Graph
from tinyspec.refimpl import evaluate, loops
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.interpreter import interpret
from tinyspec.refimpl.numeric import NP
from tinyspec.validate import validate
from test_refimpl_props import kernels, inputs_for, reachable

FORMS = Path(__file__).with_name("tinygrad_forms.py")
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_same_bits(g, inputs, what="", level="auto"):
  """evaluate() and interpret() agree: the same outputs, shapes, dtypes and bytes."""
  want = interpret(g, dict(inputs), level=level)
  got = evaluate(g, dict(inputs), level=level)
  assert sorted(got) == sorted(want), f"{what}: outputs {sorted(got)} != the definition's {sorted(want)}"
  for k in want:
    a, b = np.asarray(got[k]), np.asarray(want[k])
    assert (a.dtype, a.shape) == (b.dtype, b.shape) and a.tobytes() == b.tobytes(), \
      f"{what}: {k}: evaluate() gives {a!r}, the definition {b!r}"


def input_specs(g) -> dict:
  """{input name: (dtype, shape)} of the GLOBAL storage a kernel reads (symbolic sizes left out)."""
  views = validate(g).views
  out = {}
  for i, n in enumerate(g.nodes):
    if n.op in ("BUFFER", "PARAM") and n.arg.get("addrspace", "GLOBAL") == "GLOBAL" and len(n.src) == 1:
      out[input_name(n.op, n.arg)] = (views[i].dtype, tuple(views[i].shape))
  return out


def ordinary(dt: str, shape: tuple):
  """Arrays of dt without special values: floats of mixed magnitudes (any other order of a
  sum rounds differently), integers small or anywhere in the dtype's range."""
  def make(seed):
    rng = np.random.default_rng(seed)
    if np.dtype(NP[dt]).kind in "iu":
      info = np.iinfo(NP[dt])
      small = rng.integers(-3, 4, shape) if info.min < 0 else rng.integers(0, 4, shape)
      return np.where(rng.random(shape) < 0.8, small, rng.integers(info.min, info.max, shape, endpoint=True, dtype=NP[dt])).astype(NP[dt])
    if dt == "bool": return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(NP[dt])
  return st.integers(0, 2 ** 32 - 1).map(make)


@st.composite
def drawn_inputs(draw, g, given: dict):
  """Inputs for g: every input it was given, redrawn with its dtype and shape (edge-dense
  or ordinary values)."""
  specs = input_specs(g)
  out = dict(given)
  for k, (dt, shape) in sorted(specs.items()):
    if k in given: out[k] = draw(st.one_of(ordinary(dt, shape), arrays(dt, shape, salt=len(out))))
  return out


# ------------------------------------------------------------------ the corpus
CORPUS = [(c.id, Graph.load(c.graph), c.load_inputs()) for c in load_cases() if c.valid]
CORPUS = [(i, g, x) for i, g, x in CORPUS if validate(g).level in ("kernel", "program")]


def test_the_corpus_has_kernel_forms():
  assert len(CORPUS) >= 50 and any(validate(g).level == "program" for _, g, _ in CORPUS)


@pytest.mark.parametrize("k", range(0, len(CORPUS), 8))
def test_corpus_kernels_with_their_inputs(k):
  for case_id, g, inputs in CORPUS[k:k + 8]: assert_same_bits(g, inputs, case_id)


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_corpus_kernels_with_drawn_inputs(data):
  case_id, g, inputs = data.draw(st.sampled_from(CORPUS))
  assert_same_bits(g, data.draw(drawn_inputs(g, inputs)), case_id)


# ------------------------------------------------------------------ drawn kernels
@settings(max_examples=40, **SETTINGS)
@given(graphs("kernel"))
def test_fuzzer_kernels(d):
  assert_same_bits(d.graph, d.inputs)


@settings(max_examples=80, **SETTINGS)
@given(kernels())
def test_carried_loop_kernels(case):
  g, dtype, outs, seed = case
  used = reachable(g)
  assert_same_bits(g, {k: v for k, v in inputs_for(dtype, outs, seed).items() if k in used}, level="kernel")


# ------------------------------------------------------------------ tinygrad's kernels
def _devices() -> list[str]:
  return (["CPU"] if shutil.which("clang") else []) + ["PYTHON"]


@pytest.fixture(scope="module")
def tinygrad_kernels(tmp_path_factory) -> list:
  """Every kernel and program of tinygrad_forms.py as tinygrad ran them on each device:
  (name, graph, inputs), imported by `tinyspec import-tinygrad` in a child process per device."""
  pytest.importorskip("tinygrad")
  root = tmp_path_factory.mktemp("forms")
  procs = {}
  for dev in _devices():
    env = dict(os.environ, DEV=dev)
    procs[dev] = subprocess.Popen([sys.executable, "-m", "tinyspec.cli", "import-tinygrad", str(FORMS), "--no-check", "--out", str(root / dev)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  out = []
  for dev, p in procs.items():
    log = p.communicate(timeout=600)[0]
    assert p.returncode == 0, log
    for f in sorted((root / dev).glob("*.json")):
      if f.name.endswith("tensor.json") or f.name == "import-report.json": continue
      inputs = dict(np.load(f.with_suffix(".inputs.npz"))) if f.with_suffix(".inputs.npz").exists() else {}
      out.append((f"{dev}:{f.stem}", Graph.load(f), inputs))
  return out


def test_tinygrad_forms_cover_what_they_claim(tinygrad_kernels):
  ops = {dev: set() for dev in _devices()}
  for name, g, _ in tinygrad_kernels: ops[name.split(":")[0]] |= {n.op for n in g.nodes}
  assert {"RANGE", "REDUCE", "LOAD", "AFTER", "WHERE", "LINEAR"} <= ops["PYTHON"] and "SPECIAL" in ops["PYTHON"]
  assert len(tinygrad_kernels) >= 30 * len(ops)


def test_tinygrad_kernels_with_their_inputs(tinygrad_kernels):
  for name, g, inputs in tinygrad_kernels: assert_same_bits(g, inputs, name)


def check_drawn(kernels, max_examples: int, shrink: bool = True):
  """The property on kernels (name, graph, inputs) with drawn inputs; without shrink, it
  stops at the first counterexample (a planted bug's test only asks that there be one)."""
  phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)
  @settings(max_examples=max_examples, phases=phases, report_multiple_bugs=False, **SETTINGS)
  @given(st.data())
  def prop(data):
    name, g, inputs = data.draw(st.sampled_from(kernels))
    assert_same_bits(g, data.draw(drawn_inputs(g, inputs)), name)
  prop()


def test_tinygrad_kernels_with_drawn_inputs(tinygrad_kernels):
  check_drawn(tinygrad_kernels, 40)


# ------------------------------------------------------------------ forms written by hand
def threaded_row_sum(threads: int, rows: int, n: int, dtype="float32"):
  """The CPU device's threaded reduction (its program after import): out[c*rows + i] = the
  sum over k of x[(c*rows + i)*n + k] for the thread c = SPECIAL tidx0 (core_id), with a REG
  accumulator zeroed in each iteration of the row loop i."""
  b = Builder()
  x = b.param((threads * rows * n,), dtype, 1); out = b.param((threads * rows,), dtype, 0)
  acc = b.buffer((1,), dtype, 0, addrspace="REG")
  z = b.const(0, "index")
  c = b.add("SPECIAL", b.const(threads, "index"), arg={"name": "tidx0"})
  i = b.range(rows, 1, "LOOP")
  row = b.ADD(b.MUL(c, b.const(rows, "index")), i)
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0, dtype))
  k = b.range(n, 0, "REDUCE")
  a = b.INDEX(b.AFTER(acc, init, k), z)
  e = b.END(b.STORE(a, b.ADD(b.LOAD(a), b.LOAD(b.INDEX(x, b.ADD(b.MUL(row, b.const(n, "index")), k))))), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, row), b.LOAD(b.INDEX(b.AFTER(acc, e), z))), i))
  return b.graph()


@settings(max_examples=30, **SETTINGS)
@given(st.data())
def test_threaded_kernels(data):
  threads, rows, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.sampled_from([1, 2, 5, 7]))
  dtype = data.draw(st.sampled_from(["float32", "int32", "float16"]))
  g = threaded_row_sum(threads, rows, n, dtype)
  assert_same_bits(g, data.draw(drawn_inputs(g, {"param1": None})))


# ------------------------------------------------------------------ planted bugs
def _accumulating(kernels, dtype: str, op: str) -> list:
  """The kernels with a REG accumulator of dtype updated by op."""
  def has(g):
    views = validate(g).views
    regs = {i for i, n in enumerate(g.nodes) if n.op == "BUFFER" and n.arg.get("addrspace") == "REG" and views[i].dtype == dtype}
    return regs and any(n.op == op and views[i].dtype == dtype for i, n in enumerate(g.nodes))
  return [k for k in kernels if has(k[1])]


def test_planted_fold_in_the_wrong_order_is_caught(tinygrad_kernels, monkeypatch):
  good, good_rows = loops.accumulate, loops._fold_rows
  def backwards(op, dt, start, xs, dims, acc_first=True, on=None):   # the contributions folded last to first
    return good(op, dt, start, [np.flip(x, axis=tuple(dims)) for x in xs], dims, acc_first, on)
  def rows_backwards(op, start, xs, dims):   # the same bug in the fold by rows (a sum's last value)
    return good_rows(op, start, [np.flip(x, axis=tuple(dims)) for x in xs], dims)
  monkeypatch.setattr(loops, "accumulate", backwards)
  monkeypatch.setattr(loops, "_fold_rows", rows_backwards)
  sums = _accumulating(tinygrad_kernels, "float32", "ADD")
  assert sums
  with pytest.raises(AssertionError, match="the definition"): check_drawn(sums, 30, shrink=False)


def test_planted_product_that_does_not_wrap_is_caught(tinygrad_kernels, monkeypatch):
  good = loops.fold
  def in_floats(op, dt, start, xs, dims, acc_first=True, on=None):   # an int product carried in float64: it saturates, rounds
    if op != "MUL" or dt != "int32": return good(op, dt, start, xs, dims, acc_first, on)
    last = good(op, "float64", start.astype(np.float64), [x.astype(np.float64) for x in xs], dims, acc_first, on)
    return np.clip(last, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
  monkeypatch.setattr(loops, "fold", in_floats)
  products = _accumulating(tinygrad_kernels, "int32", "MUL")
  assert products
  with pytest.raises(AssertionError, match="the definition"): check_drawn(products, 30, shrink=False)


def gated_accumulator(rows: int, n: int):
  """The form of tinygrad's threaded cumsum backward on the CPU device (issue 31, S7): a REG
  accumulator updated by STOREs inside IF blocks of an inner loop (the gate varies with it),
  read after the loop's END and stored to the output: out[c*rows + i] = #{k < n : k < i + c + 1}."""
  b = Builder()
  out = b.param((2 * rows,), "float32", 0)
  acc = b.buffer((1,), "float32", 0, addrspace="REG")
  z = b.const(0, "index")
  c = b.add("SPECIAL", b.const(2, "index"), arg={"name": "tidx0"})
  i = b.range(rows, 1, "LOOP")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0.0, "float32"))
  k = b.range(n, 0, "REDUCE")
  a = b.INDEX(b.AFTER(acc, init, k), z)
  f = b.IF(b.CMPLT(k, b.ADD(b.ADD(i, c), b.const(1, "index"))), a)
  st = b.STORE(a, b.ADD(b.LOAD(a), b.const(1.0, "float32")))   # inside the IF block by its position
  b.ENDIF(f)
  e = b.END(b.GROUP(st), k)   # ordered after the gated STORE, not inside its block
  row = b.ADD(b.MUL(c, b.const(rows, "index")), i)
  b.SINK(b.END(b.STORE(b.INDEX(out, row), b.LOAD(b.INDEX(b.AFTER(acc, e), z))), i))
  b.PROGRAM(b.LINEAR(*range(len(b.nodes))), arg={"name": "cumsum_backward"})
  return b.graph()


def test_store_after_a_gated_accumulation_is_not_gated():
  # a STORE ordered after IF-gated STOREs (through GROUP and END) runs everywhere: the
  # reference, the definition and the error bound's graph gave zeros or refused
  from tinyspec.refimpl.errorbound import evaluate_with_bounds
  rows, n = 3, 5
  g = gated_accumulator(rows, n)
  want = np.array([min(i + c + 1, n) for c in range(2) for i in range(rows)], np.float32)
  assert np.array_equal(interpret(g)["param0"], want)
  assert np.array_equal(evaluate(g)["param0"], want)
  got, bounds = evaluate_with_bounds(g, {})
  assert np.array_equal(got["param0"], want) and np.all(bounds["param0"] == 0)


def test_tinygrads_threaded_cumsum_backward():
  # the program tinygrad's CPU device ran (2 threads, nested REG accumulators, IF-gated
  # STOREs): d/dx_i sum(cumsum(x)) = N - i, as tinygrad gives (too long for the interpreter:
  # its form is gated_accumulator above, with the error bound's graph; this one's takes a minute)
  g = Graph.load(Path(__file__).with_name("data") / "cumsum_backward_cpu_threads.program.json")
  assert np.array_equal(evaluate(g)["param0"], np.arange(600, 0, -1).astype(np.float32))
