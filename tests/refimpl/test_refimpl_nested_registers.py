"""Register accumulations nested in loops (tinygrad's winograd programs nest their
registers so): each register's loop runs anew at every point of the loops around it, even
where its AFTERs list only some of them (decision kernel-loops). Adversaries:

  * evaluate() and the interpreter that defines it give the same bits as the sequential
    program written out in Python, on nests of depth 1-3 with the register set in every
    enclosing point (listing every enclosing loop, as tinygrad does, or only the nearest)
    or once before everything, updates `acc + x` (an accumulation) and `acc*0.5 + x` (a
    stepped loop), loop ids outer-first and inner-first;
  * the same forms with every loop stepped (a stepped loop inside a stepped one reads one
    register state for all points of the stepped loops its AFTER lists), and planted bugs
    caught: an AFTER that does not depend on the loops around the loop it lists, and an
    accumulation over loops closed apart (read between them) folded as one;
  * tinygrad's PYTHON device computes the same bits for the same UOps (skipped without tinygrad).
"""
from __future__ import annotations
import itertools
from dataclasses import dataclass
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tinyspec.refimpl import carried, evaluate, plan, prepared
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.interpreter import interpret

F32 = "float32"
HALF = np.float32(0.5)


@dataclass(frozen=True)
class Nest:
  """out[i] = the outermost register after its loop; register k accumulates over loop k
  the value register k+1 has after its own loop (the innermost: x[i, r0, r1, ...])."""
  sizes: tuple            # (M, R0, R1, ...): the LOOP over i, then one REDUCE per register
  init: tuple             # per register: "all" enclosing loops listed, "near" (the nearest only), "once" (before i)
  decay: tuple            # per register: acc*0.5 + v instead of acc + v
  inner_first: bool = False   # loop ids from the innermost loop out (tinygrad numbers its ranges so)

  @property
  def depth(self): return len(self.sizes) - 1

  def ids(self):
    return list(range(self.depth, -1, -1)) if self.inner_first else list(range(self.depth + 1))


def write(w, f: Nest):
  """The kernel of f through writer w (a tinyspec graph or tinygrad UOps)."""
  M, R = f.sizes[0], f.sizes[1:]
  x, out = w.param((M, *R), 0, "x"), w.param((M,), 1, "out")
  regs = [w.reg(k) for k in range(f.depth)]
  zero, half = w.f32(0.0), w.f32(0.5)
  once = {k: w.store(w.at(regs[k]), zero) for k in range(f.depth) if f.init[k] == "once"}
  ids = f.ids()
  i = w.range(M, ids[0], "LOOP")

  def level(k, loops):
    acc = regs[k]
    if f.init[k] != "once":
      init = w.store(w.at(w.after(acc, *(loops if f.init[k] == "all" else loops[-1:]))), zero)
    r = w.range(R[k], ids[k + 1], "REDUCE")
    a = w.after(acc, once[k], i, r) if f.init[k] == "once" else w.after(acc, init, r)
    v = level(k + 1, loops + [r]) if k + 1 < f.depth else w.load(w.at(x, (M, *R), i, *loops[1:], r))
    cur = w.load(w.at(a))
    if f.decay[k]: cur = w.mul(cur, half)
    done = w.end(w.store(w.at(a), w.add(cur, v)), r)
    return w.load(w.at(w.after(acc, done)))

  return w.sink(w.end(w.store(w.at(out, (M,), i), level(0, [i])), i))


def sequential(f: Nest, x: np.ndarray) -> np.ndarray:
  """What the kernel computes, as the loops of a C program, in float32."""
  M, R = f.sizes[0], f.sizes[1:]
  out, regs = np.zeros(M, np.float32), [np.float32(0)] * f.depth

  def run(k, m, at):
    if f.init[k] != "once": regs[k] = np.float32(0)
    for t in range(R[k]):
      v = run(k + 1, m, at + (t,)) if k + 1 < f.depth else x[(m, *at, t)]
      regs[k] = np.float32((regs[k] * HALF if f.decay[k] else regs[k]) + v)
    return regs[k]

  for m in range(M): out[m] = run(0, m, ())
  return out


class GraphWriter:
  """write()'s writer for a tinyspec graph."""
  def __init__(self): self.b = Builder()
  def param(self, shape, slot, name): return self.b.param(shape, F32, slot, name=name)
  def reg(self, slot): return self.b.buffer((1,), F32, slot, addrspace="REG")
  def range(self, n, id, type): return self.b.range(n, id, type)
  def after(self, buf, *deps): return self.b.AFTER(buf, *deps)
  def at(self, buf, shape=None, *idx): return self.b.INDEX(buf, *(idx or [self.b.const(0, "index")]))
  def load(self, p): return self.b.LOAD(p)
  def store(self, p, v): return self.b.STORE(p, v)
  def end(self, x, r): return self.b.END(x, r)
  def add(self, a, b): return self.b.ADD(a, b)
  def mul(self, a, b): return self.b.MUL(a, b)
  def f32(self, v): return self.b.const(v, F32)
  def sink(self, x): self.b.SINK(x); return self.b.graph()


def forms():
  """Every form of depth 1-3 the parameters give (init 'once' only on the outermost register)."""
  out = []
  for sizes in ((3, 4), (2, 3, 4), (2, 2, 3, 2)):
    D = len(sizes) - 1
    for init0, rest, decay, inner_first in itertools.product(("all", "near", "once"), ("all", "near"), range(2 ** D), (False, True)):
      if D == 1 and (rest == "near" or init0 == "near"): continue   # the same form as "all"
      out.append(Nest(sizes, (init0,) + (rest,) * (D - 1), tuple(bool(decay >> k & 1) for k in range(D)), inner_first))
  return out


FORMS = forms()


def _inputs(f: Nest, seed=0) -> dict:
  x = np.random.default_rng(seed).standard_normal(f.sizes).astype(np.float32)
  return {"x": x, "out": np.zeros(f.sizes[0], np.float32)}


def _same_bits(a, b): return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("f", FORMS, ids=str)
def test_the_interpreter_computes_the_sequential_program(f):
  ins = _inputs(f)
  assert _same_bits(interpret(write(GraphWriter(), f), dict(ins))["out"], sequential(f, ins["x"]))


@pytest.mark.parametrize("f", FORMS, ids=str)
def test_evaluate_computes_the_sequential_program(f):
  ins = _inputs(f)
  assert _same_bits(evaluate(write(GraphWriter(), f), dict(ins))["out"], sequential(f, ins["x"]))


@st.composite
def nests(draw):
  """Any form: depth 1-3, every loop 1-3 long (a loop of one iteration included), each
  register's init and update drawn apart."""
  depth = draw(st.integers(1, 3))
  sizes = tuple(draw(st.lists(st.integers(1, 3), min_size=depth + 1, max_size=depth + 1)))
  init = (draw(st.sampled_from(("all", "near", "once"))),) + tuple(draw(st.sampled_from(("all", "near"))) for _ in range(depth - 1))
  return Nest(sizes, init, tuple(draw(st.lists(st.booleans(), min_size=depth, max_size=depth))), draw(st.booleans()))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(nests(), st.integers(0, 2 ** 16))
def test_drawn_nests_compute_the_sequential_program(f, seed):
  ins = _inputs(f, seed)
  want, g = sequential(f, ins["x"]), write(GraphWriter(), f)
  assert _same_bits(interpret(g, dict(ins))["out"], want), "the definition"
  assert _same_bits(evaluate(g, dict(ins))["out"], want), "the evaluator"


@pytest.fixture
def all_stepped(monkeypatch):
  """No loop is an accumulation: every carried loop is stepped one iteration at a time."""
  prepared.clear()   # no plan made with the accumulations
  monkeypatch.setattr(carried, "accumulations", lambda *a, **k: None)
  yield
  prepared.clear()


@pytest.mark.parametrize("f", [f for f in FORMS if not any(f.decay)], ids=str)
def test_every_loop_stepped_computes_the_sequential_program(f, all_stepped):
  ins = _inputs(f, 1)
  assert _same_bits(evaluate(write(GraphWriter(), f), dict(ins))["out"], sequential(f, ins["x"]))


def test_a_planted_after_blind_to_the_loops_around_its_loop_is_caught(monkeypatch):
  f = Nest((2, 3, 4), ("all", "near"), (False, True))   # the inner register stepped, its init listing r0 only
  ins = _inputs(f)
  g, want = write(GraphWriter(), f), sequential(f, ins["x"])
  assert _same_bits(evaluate(g, dict(ins))["out"], want)
  prepared.clear()
  monkeypatch.setattr(plan, "listed_ranges", lambda nodes, a: [])   # the rule gone from the evaluator's loop axes
  try: assert not _same_bits(evaluate(g, dict(ins))["out"], want)
  finally: prepared.clear()


class TinygradWriter:
  """write()'s writer for tinygrad UOps: the kernel Tensor.custom_kernel runs, over its
  placeholders (x, out); a register is tinygrad's REG placeholder, as its reduce lowering makes."""
  def __init__(self, placeholders):
    from tinygrad import dtypes
    from tinygrad.dtype import AddrSpace
    from tinygrad.uop.ops import AxisType, KernelInfo, UOp
    self.UOp, self.AxisType, self.KernelInfo, self.AddrSpace, self.dt = UOp, AxisType, KernelInfo, AddrSpace, dtypes
    self.placeholders = placeholders
  def param(self, shape, slot, name): return self.placeholders[slot]
  def reg(self, slot): return self.UOp.placeholder((1,), self.dt.float, slot, self.AddrSpace.REG)
  def range(self, n, id, type): return self.UOp.range(n, id, self.AxisType[type])
  def after(self, buf, *deps): return buf.after(*deps)
  def at(self, buf, shape=None, *idx):
    flat = self.UOp.const(0, self.dt.int)
    for k, x in enumerate(idx): flat = flat * shape[k] + x
    return buf.index(flat)
  def load(self, p): return p
  def store(self, p, v): return p.store(v)
  def end(self, x, r): return x.end(r)
  def add(self, a, b): return a + b
  def mul(self, a, b): return a * b
  def f32(self, v): return self.UOp.const(v, self.dt.float)
  def sink(self, x): return x.sink(arg=self.KernelInfo(name="nest", opts_to_apply=()))


TINYGRAD_FORMS = [Nest((2, 3, 4), ("near", "near"), (False, False)), Nest((2, 3, 4), ("all", "near"), (False, True)),
                  Nest((2, 3, 4), ("all", "all"), (True, False), inner_first=True), Nest((2, 2, 3, 2), ("all", "near", "near"), (False, False, True)),
                  Nest((3, 4), ("once",), (False,)), Nest((2, 2, 3, 2), ("all", "all", "all"), (True, True, False))]


@pytest.mark.parametrize("f", TINYGRAD_FORMS, ids=str)
def test_tinygrads_python_device_computes_the_same(f):
  pytest.importorskip("tinygrad")
  from tinygrad import Tensor
  from tinygrad.helpers import Context
  ins = _inputs(f, 2)
  with Context(DEV="PYTHON"):
    x, out = (Tensor(ins[k].reshape(-1), device="PYTHON").contiguous() for k in ("x", "out"))
    got, _ = Tensor.custom_kernel(out, x, fxn=lambda o, xx: write(TinygradWriter({0: xx, 1: o}), f))
    tg = got.numpy()
  assert _same_bits(tg, sequential(f, ins["x"]))
  g = write(GraphWriter(), f)
  assert _same_bits(interpret(g, dict(ins))["out"], tg)
  assert _same_bits(evaluate(g, dict(ins))["out"], tg)


def test_a_planted_accumulation_over_loops_closed_apart_is_caught(monkeypatch):
  f = Nest((3, 4), ("once",), (False,))   # one register over i and r, read after r at each i: a running sum
  ins = _inputs(f)
  g, want = write(GraphWriter(), f), sequential(f, ins["x"])
  assert _same_bits(evaluate(g, dict(ins))["out"], want)
  prepared.clear()
  monkeypatch.setattr(carried, "closed_together", lambda *a: True)   # folded as one accumulation
  try: assert not _same_bits(evaluate(g, dict(ins))["out"], want)
  finally: prepared.clear()
