"""The renderer's interval-selected fast paths (compiler/render PREDICATES, render.yaml
`if:`) hold for every integer dtype: kernels of every op that has such a case, over
narrowed operands (x // 3 with x possibly negative, x << (k % 4 - 2), sums that fit or
not), give the reference's bits on c and opencl, and on c built with UBSan and without
-fwrapv nothing is undefined. Every predicate is seen both holding and failing. Each
predicate weakened by a mutation (the dividend's sign test dropped, a negative or too
wide shift allowed, `exact` always true) makes the check fail: the tests can fail.
"""
from __future__ import annotations
import random
import pytest
from tinyspec.uop import UOp
from tinyspec.dtypes import DTYPES
from tinyspec.compiler import compile_graph, render
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.check import compare
from rewrite_cases import INT_DTYPES, ProbeKernel, operand, edge_const, valid
from targets import TARGETS
from test_compiler_ub import SANITIZE, _ubsan_works


def predicate_ops() -> dict[str, list[tuple[str, list]]]:
  """predicate -> [(op, dtype classes of its `if` case)] from render.yaml."""
  out: dict = {}
  for op, cases in render_tables()["ops"].items():
    for c in cases:
      if "if" in c: out.setdefault(c["if"], []).append((op, c.get("class")))
  return out


AMOUNTS = ["0", "w-1", "w", "-1", "k%4", "k%4-2", "k%w", "k"]


def _amount(kb: ProbeKernel, dt: str, k: int) -> UOp:
  """Shift amount kind k: in [0, width) or not, negative or not (k % 4 - 2 among them)."""
  w, d = DTYPES[dt].bits, DTYPES[dt]
  kind = AMOUNTS[k % len(AMOUNTS)]
  if kind in ("0", "w-1", "w", "-1"):
    v = {"0": 0, "w-1": w - 1, "w": w, "-1": -1}[kind]
    return const(v if d.min <= v <= d.max else w - 1, dt)
  if kind == "k": return kb.load(dt)
  m = UOp("MOD", (kb.load(dt), const(4 if kind != "k%w" else min(w, int(d.max)), dt)))
  return m if kind != "k%4-2" else UOp("ADD", (m, const(-2 if d.cls != "uint" else 1, dt)))


DIVISORS = ["3", "1", "100", "max1", "k%5+1", "k"]


def _divisor(kb: ProbeKernel, dt: str, k: int) -> UOp:
  kind = DIVISORS[k % len(DIVISORS)]
  if kind in ("3", "1", "100"): return const(min(int(kind), int(DTYPES[dt].max)), dt)
  if kind == "max1": return UOp("MAX", (kb.load(dt), const(1, dt)))
  if kind == "k": return kb.load(dt)
  return UOp("ADD", (UOp("MOD", (kb.load(dt), const(5, dt))), const(1, dt)))


def node(kb: ProbeKernel, op: str, dt: str, k: int) -> UOp:
  """Op node number k over narrowed operands of dt: dividends of both signs or not,
  divisors and amounts cycling through their kinds, sums that fit or overflow."""
  a = operand(kb, dt)
  if op == "SHR" and k % 2 == 0: a = UOp("MOD", (kb.load(dt), const(min(1000, int(DTYPES[dt].max)), dt)))   # a value >= 0
  if op in ("SHL", "SHR"): return UOp(op, (a, _amount(kb, dt, k // 2 if op == "SHR" else k)))
  if op in ("IDIV", "MOD"): return UOp(op, (a, _divisor(kb, dt, k)))
  if op == "NEG": return UOp("NEG", (a,))
  return UOp(op, (a, operand(kb, dt) if kb.rng.random() < 0.8 else const(edge_const(dt, kb.rng), dt)))


def _classes(dt: str, classes) -> bool:
  return classes is None or dt in classes or DTYPES[dt].cls in classes


def check(target: str, pred: str, capfd=None, seed: int = 0, per_dtype: int = 16) -> tuple[list[str], dict]:
  """One kernel holding nodes of every op predicate `pred` selects for, in every integer
  dtype; (problems, {True: n, False: n}: how often the predicate held on the rendered
  nodes, per dtype)."""
  from tinyspec.refimpl import evaluate
  from tinyspec.graph import Graph
  kb = ProbeKernel(random.Random(f"{pred}-{seed}"))
  for dt in INT_DTYPES:
    ops = [op for op, cl in predicate_ops()[pred] if _classes(dt, cl)]
    for k in range(per_dtype if ops else 0):
      x = node(kb, ops[k % len(ops)], dt, k // len(ops))
      if valid(x): kb.output(x)
  sink = kb.sink()
  inputs = kb.used_inputs(sink)
  want = evaluate(Graph.from_uops(sink, level="kernel"), inputs)
  c = compile_graph(sink, target, [])
  ops = {op for op, _ in predicate_ops()[pred]}
  seen: dict = {}
  for lin in c.linear:
    for u in lin.src:
      if u.op in ops and isinstance(props(u).dtype, str) and not props(u).shape and render.select_case(u, target) is not None:
        held = seen.setdefault(props(u).dtype, {True: 0, False: 0})
        held[render.PREDICATES[pred](u)] += 1
  got = c.run(inputs)
  problems = [f"{name} ({props(e).dtype} {e.op}): {msg}" for name, e in kb.outputs if (msg := compare(got[name], want[name], props(e).dtype)) is not None]
  if capfd is not None:
    err = capfd.readouterr().err
    problems += [line for line in err.splitlines() if "runtime error" in line][:5]
  return problems, seen


PREDICATES = sorted(predicate_ops())


def test_every_predicate_is_tested():
  assert set(PREDICATES) == set(render.PREDICATES)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pred", PREDICATES)
def test_fast_paths_keep_the_reference_bits(pred, target, monkeypatch, capfd):
  ub = target == "c" and _ubsan_works()
  if ub: monkeypatch.setenv("TINYSPEC_CFLAGS", SANITIZE)
  problems, seen = check(target, pred, capfd if ub else None)
  assert not problems, f"{pred}: {problems[:5]}"
  for dt in INT_DTYPES:
    if any(_classes(dt, cl) for _, cl in predicate_ops()[pred]):
      held = seen.get(dt, {True: 0, False: 0})
      assert held[True] > 0 and held[False] > 0, f"{pred} {dt}: held {held[True]} times, failed {held[False]}: both paths must be exercised"


MUTANTS = {
  "div_plain": ("the dividend's sign test dropped", lambda u: props(u.src[1]).min_max[0] >= 1),
  "shl_plain": ("a negative amount allowed", lambda u: props(u.src[1]).min_max[1] < DTYPES[props(u).dtype].bits),
  "shift_plain": ("an amount of the width allowed", lambda u: 0 <= props(u.src[1]).min_max[0] and props(u.src[1]).min_max[1] <= DTYPES[props(u).dtype].bits
                  and (DTYPES[props(u).dtype].cls == "uint" or props(u.src[0]).min_max[0] >= 0)),
  "exact": ("any sum taken to fit", lambda u: True),
}


def test_every_predicate_has_a_mutant():
  assert set(MUTANTS) == set(render.PREDICATES)


@pytest.mark.skipif(not _ubsan_works(), reason="the C compiler cannot build with -fsanitize=undefined")
@pytest.mark.parametrize("pred", sorted(MUTANTS))
def test_a_weakened_predicate_is_caught(pred, monkeypatch, capfd):
  """The check above fails once the predicate is weakened (on c with UBSan: `exact`
  taken always true only shows as undefined behaviour, since C wraps in practice)."""
  monkeypatch.setenv("TINYSPEC_CFLAGS", SANITIZE)
  monkeypatch.setitem(render.PREDICATES, pred, MUTANTS[pred][1])
  problems, _ = check("c", pred, capfd)
  assert problems, f"{pred} with {MUTANTS[pred][0]} survived"


def test_the_corpus_holds_both_paths_of_every_predicate():
  """conformance/cases */<dtype>-narrowed (conformance/corpus/templates.yaml): compiled for c,
  their nodes make every predicate hold and fail in every integer dtype it applies to."""
  from tinyspec.conformance.corpus.cases import load_cases
  seen: dict = {}
  for case in load_cases():
    if not case.id.endswith("-narrowed"): continue
    dt = case.id.split("/")[1][: -len("-narrowed")]
    from tinyspec.graph import load_file
    for lin in compile_graph(load_file(case.graph)[0], "c").linear:
      for u in lin.src:
        for pred, ops in predicate_ops().items():
          if u.op in [op for op, _ in ops] and props(u).dtype == dt and render.select_case(u, "c") is not None:
            seen.setdefault((pred, dt), set()).add(render.PREDICATES[pred](u))
  for pred, ops in predicate_ops().items():
    for dt in INT_DTYPES:
      if any(_classes(dt, cl) for _, cl in ops): assert seen.get((pred, dt)) == {True, False}, (pred, dt, seen.get((pred, dt)))
