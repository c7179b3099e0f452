"""tinyspec/errorbound.py: the forward error bound the importer judges whole graphs by
(portable profile). Each guarantee has an adversary: results a portable backend may give
(another summation order, a fused multiply-add, float64 arithmetic rounded once) lie within
the bound; planted errors that the old tolerance (1e-5 x the largest value) let through lie
outside; the rewritten graph validates at kernel and program level (principle 6)."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.errorbound import shadow, within
from tinyspec.refimpl.errorbound import evaluate_with_bounds
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from tinyspec.validate import validate

F32 = "float32"
rng = np.random.default_rng(14)


def idx(b, v): return b.const(v, "index")


def reg_sum_kernel(M, K):
  """out[i] = sum over k of x[i, k] through a REG accumulator, as tinygrad emits it."""
  b = Builder()
  x = b.param((M, K), F32, 0, name="x"); out = b.param((M,), F32, 1, name="out")
  acc = b.buffer((1,), F32, 0, addrspace="REG")
  z = idx(b, 0)
  i = b.range(M, 0, "GLOBAL")
  init = b.STORE(b.INDEX(b.AFTER(acc, i), z), b.const(0.0, F32))
  k = b.range(K, 1, "REDUCE")
  a = b.AFTER(acc, init, k)
  e = b.END(b.STORE(b.INDEX(a, z), b.ADD(b.INDEX(a, z), b.INDEX(x, i, k))), k)
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.INDEX(b.AFTER(acc, e), z)), i))
  return b.graph()


def reduce_kernel(M, K):
  """out[i] = REDUCE ADD over k of x[i, k]: a backend may add in any order (decision reduce-empty)."""
  b = Builder()
  x = b.param((M, K), F32, 0, name="x"); out = b.param((M,), F32, 1, name="out")
  i = b.range(M, 0, "GLOBAL"); k = b.range(K, 1, "REDUCE")
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.REDUCE(b.INDEX(x, i, k), k, arg={"op": "ADD"})), i))
  return b.graph()


def cancelling_rows(M, K):
  """Rows whose terms are large and cancel (sums near zero), next to a row of small terms."""
  x = rng.standard_normal((M, K)).astype(np.float32) * 1e3
  x[:, K // 2:] = -x[:, :K // 2] + rng.standard_normal((M, K - K // 2)).astype(np.float32) * 1e-3
  x[0] = rng.standard_normal(K).astype(np.float32) * 1e-3
  return x


def other_orders(x):
  """Sums of each row a portable backend may give: reversed, pairwise (NumPy), in float64 rounded once."""
  rev = np.zeros(x.shape[0], np.float32)
  for k in reversed(range(x.shape[1])): rev = (rev + x[:, k]).astype(np.float32)
  return [rev, x.sum(axis=1, dtype=np.float32), x.astype(np.float64).sum(axis=1).astype(np.float32)]


def test_any_summation_order_is_within_the_bound_of_a_reduce():
  M, K = 6, 64
  x = cancelling_rows(M, K)
  got, bounds = evaluate_with_bounds(reduce_kernel(M, K), {"x": x, "out": np.zeros(M, np.float32)})
  b = bounds["out"]
  assert np.isfinite(b).all() and (b > 0).all()
  for alt in other_orders(x): assert within(alt, got["out"], b).all()
  # the bound follows each row's terms: the row of small terms gets a bound a million times smaller
  assert b[0] < 1e-5 * b[1:].min()


def test_an_explicit_loop_fixes_the_order():
  """A REG accumulator's loop runs in order (decision kernel-loops): its exact ADDs leave
  nothing to bound, and a reordered sum (tinygrad's C renderer dropping parentheses,
  docs/tinygrad-bugs.md c-renderer-reassociates) is outside."""
  M, K = 6, 64
  x = cancelling_rows(M, K)
  got, bounds = evaluate_with_bounds(reg_sum_kernel(M, K), {"x": x, "out": np.zeros(M, np.float32)})
  seq = np.zeros(M, np.float32)
  for k in range(K): seq = (seq + x[:, k]).astype(np.float32)
  assert np.array_equal(got["out"], seq) and (bounds["out"] == 0).all()
  assert not within(other_orders(x)[0], got["out"], bounds["out"]).all()


def test_a_planted_error_the_old_tolerance_accepted_is_outside_the_bound():
  M, K = 6, 64
  x = cancelling_rows(M, K)
  got, bounds = evaluate_with_bounds(reduce_kernel(M, K), {"x": x, "out": np.zeros(M, np.float32)})
  want = got["out"].copy()
  wrong = want.copy()
  wrong[0] += np.float32(1e-3)          # row 0 sums ~1e-2: a 10% error there
  old_tolerance = 1e-5 * np.abs(want).max()
  assert abs(float(wrong[0]) - float(want[0])) <= old_tolerance or np.abs(want).max() < 1e2
  ok = within(wrong, want, bounds["out"])
  assert not ok[0] and ok[1:].all()


def tensor_mulacc(n):
  """out = a*b + c at tensor level (a backend may contract it into one fused MULACC)."""
  b = Builder()
  a = b.param((n,), F32, 0, name="a"); bb = b.param((n,), F32, 1, name="b"); c = b.param((n,), F32, 2, name="c")
  return b.graph([b.ADD(b.MUL(a, bb), c)], level="tensor")


def test_a_fused_multiply_add_is_within_the_bound():
  n = 512
  a, bb = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  c = -(a.astype(np.float64) * bb).astype(np.float32)   # a*b + c cancels to the product's rounding error
  got, bounds = evaluate_with_bounds(tensor_mulacc(n), {"a": a, "b": bb, "c": c})
  fused = (a.astype(np.float64) * bb + c).astype(np.float32)
  assert (fused != got["out0"]).any(), "the adversary must differ from the unfused result"
  assert within(fused, got["out0"], bounds["out0"]).all()
  assert not within(fused * 3 + 1e-30, got["out0"], bounds["out0"]).all()


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
def test_an_explicit_mulacc_of_exact_operands_holds_its_fused_and_wide_results(dt):
  """An explicit MULACC (tinygrad's lowered programs, its PYTHON device) of inputs: no operand
  error, yet decision mulacc-rounding allows the fused and the wide results, which differ from
  the canonical one where a*b + c cancels. The bound holds both, and not a planted error."""
  from tinyspec.refimpl.numeric import np_dtype
  n, T = 256, np_dtype(dt)
  a, bb = (rng.standard_normal(n).astype(np.float32).astype(T) for _ in range(2))
  c = (-(a.astype(np.float64) * bb.astype(np.float64))).astype(T)
  b = Builder()
  xs = [b.param((n,), dt, k, name=nm) for k, nm in enumerate("abc")]
  g = b.graph([b.MULACC(*xs)], level="tensor")
  ins = {"a": a, "b": bb, "c": c}
  got, bounds = evaluate_with_bounds(g, ins)
  for v in ("fused", "wide"):
    alt = evaluate(g, ins, variants=(v,))["out0"]
    assert (alt != got["out0"]).any(), f"the {v} result must differ somewhere"
    assert within(alt, got["out0"], bounds["out0"]).all(), v
  wrong = (got["out0"].astype(np.float64) + 4 * np.abs(a.astype(np.float64) * bb.astype(np.float64)) * 2.0 ** -7 + 1).astype(T)
  assert not within(wrong, got["out0"], bounds["out0"]).all()


def test_outside_an_ops_domain_the_bound_is_inf_nan_is_a_class_and_exact_integers_get_zero():
  b = Builder()
  x = b.param((4,), F32, 0, name="x"); i = b.param((4,), "int32", 1, name="i")
  g = b.graph([b.SIN(x), b.SQRT(x), b.ADD(i, b.const(1, "int32"))], level="tensor")
  x_in = np.array([1.0, 1e6, -1, 2], np.float32)
  got, bounds = evaluate_with_bounds(g, {"x": x_in, "i": np.arange(4, dtype=np.int32)})
  assert np.isinf(bounds["out0"][1]) and np.isfinite(bounds["out0"][[0, 2, 3]]).all()   # SIN's domain: |x| <= 1e5
  assert bounds["out1"][2] == 0 and np.isnan(got["out1"][2])   # SQRT(-1) must be a NaN, of any payload
  assert not within(np.float32([0.0]), got["out1"][2:3], bounds["out1"][2:3]).any()
  assert (bounds["out2"] == 0).all()


def test_within_treats_nan_and_zero_signs_as_classes():
  want = np.array([np.nan, 0.0, 1.0, 2.0], np.float32)
  got = np.array([np.nan, -0.0, 1.0, 5.0], np.float32)
  assert within(got, want, np.array([0, 0, 0, np.inf])).all()
  assert not within(np.array([1.0], np.float32), np.array([np.nan], np.float32), 0.5).any()


def test_the_rewritten_kernel_validates_and_keeps_the_outputs():
  """Principle 6: the shadow graph validates, and the original outputs are unchanged."""
  M, K = 3, 8
  g = reg_sum_kernel(M, K)
  sg, names = shadow(g)
  assert validate(sg).ok, [d.format() for d in validate(sg).diagnostics[:3]]
  assert names == {"out": "out__err"}
  x = rng.standard_normal((M, K)).astype(np.float32)
  inputs = {"x": x, "out": np.zeros(M, np.float32)}
  got, _ = evaluate_with_bounds(g, inputs)
  assert np.array_equal(got["out"], evaluate(g, inputs)["out"])


def test_imported_programs_shadow_at_every_level_and_the_importer_finds_tinygrads_rewrite():
  """mlp_sgd's tanh gradient: tinygrad rewrites x*(1/(1+x)) to 1-1/(1+x) (docs/tinygrad-bugs.md
  recip-cancellation); the importer must report that kernel, and only it, out of bound."""
  pytest.importorskip("tinygrad")
  from pathlib import Path
  from tinyspec.interop.script import import_script
  res = import_script(Path(__file__).resolve().parents[2] / "interop" / "programs" / "mlp_sgd.py")
  assert res.error is None and {g.level for g in res.graphs} == {"tensor", "kernel", "program"}
  bad = [g.name for g in res.graphs if not g.eval_ok]
  assert bad == ["r4.k3.kernel"], [(g.name, g.evaluation) for g in res.graphs if not g.eval_ok]
  assert "outside the portable bound" in res.graphs[[g.name for g in res.graphs].index("r4.k3.kernel")].evaluation
  assert not res.ok
  for g in res.graphs:
    assert "no error bound" not in g.evaluation, f"{g.name}: {g.evaluation}"
    if g.level == "program": assert validate(shadow(g.graph)[0]).ok, g.name


def test_a_void_root_among_value_roots_keeps_the_evaluators_names():
  """Roots (value, GROUP of a store, value): the evaluator names the values out0 and out2 by
  their positions; the bounds come under the same names and no shadow output leaks."""
  b = Builder()
  x = b.param((4,), F32, 0, name="x"); y = b.buffer((4,), F32, 1, name="y")
  g = b.graph([b.SIN(x), b.GROUP(b.STORE(y, b.MUL(x, x))), b.ADD(x, x)], level="tensor")
  ins = {"x": np.linspace(-1, 1, 4).astype(np.float32), "y": np.zeros(4, np.float32)}
  got, bounds = evaluate_with_bounds(g, ins)
  plain = evaluate(g, ins)
  assert sorted(got) == sorted(plain) == ["out0", "out2", "y"]
  assert all(np.array_equal(got[k], plain[k]) for k in plain)
  assert {"out0", "out2", "y"} <= set(bounds) and bounds["out0"].shape == (4,)


def test_the_closed_forms_are_the_corners_maximum(monkeypatch):
  """tinyspec/errorbound_forms.py: each op's bound in closed form is the corners' maximum
  where the values are finite, and never below it (specials, flipping gates, NaN included)."""
  from tinyspec import errorbound
  b = Builder()
  x = b.param((64,), F32, 0, name="x"); y = b.param((64,), F32, 1, name="y")
  p, q = b.EXP2(x), b.LOG2(y)   # inexact operands (and exact ones: x, y)
  roots = [b.ADD(p, q), b.SUB(p, x), b.MUL(p, q), b.MUL(x, q), b.MAX(p, q), b.NEG(q), b.CAST(p, arg="float16"),
           b.WHERE(b.CMPLT(p, q), p, q), b.WHERE(b.CMPLT(x, y), p, y), b.CMPNE(p, q), b.CMPEQ(q, x),
           b.CAST(b.CMPLT(q, p), arg=F32), b.DIV(p, q), b.RECIP(q), b.DIV(x, q), b.DIV(p, y), q]
  g = b.graph(roots, level="tensor")
  xs = rng.standard_normal(64).astype(np.float32) * 4
  ys = np.abs(rng.standard_normal(64)).astype(np.float32) * 4
  xs[:8], ys[:8] = [np.inf, -np.inf, np.nan, 0, 200, -200, 1, 2], [np.inf, 0, 1, np.nan, -1, 2, 2, 4]
  ys[8:16] = np.exp2(xs[8:16]).astype(np.float32)   # gates that may flip
  inputs = {"x": xs, "y": ys}
  with np.errstate(all="ignore"):
    operands_finite = np.isfinite(xs) & np.isfinite(ys) & np.isfinite(np.exp2(xs)) & np.isfinite(np.log2(ys))
    _, closed = evaluate_with_bounds(g, inputs)
    monkeypatch.setattr(errorbound.FIRST_ORDER, "handlers", {})
    got, corners = evaluate_with_bounds(g, inputs)
  for k in corners:
    c, f = corners[k], closed[k]
    below = f < c * (1 - 1e-9)
    assert not below.any(), (k, np.flatnonzero(below), f[below], c[below])
    # where finite, equal, except where float64 absorbed a tiny move the corners then missed
    # (the closed form counts the one rounding more that the move costs)
    finite = np.isfinite(np.asarray(got[k], np.float64)) & operands_finite & np.isfinite(c)
    one_rounding = 2 * np.abs(np.spacing(np.asarray(got[k]))).astype(np.float64)
    same = np.isclose(f, c, rtol=1e-9, atol=0) | ((c == 0) & (f <= one_rounding))
    if k in ("out9", "out10"): continue   # CMPNE/CMPEQ: the corners miss an equality inside the intervals (below)
    if k in ("out12", "out13", "out14"):   # a divisor q whose interval reaches 0: a pole the corners miss (inf)
      pole = np.abs(got["out16"].astype(np.float64)) <= closed["out16"]
      assert np.isinf(f[pole]).all()
      finite &= ~pole
    assert same[finite].all(), (k, np.flatnonzero(finite & ~same), f[finite & ~same], c[finite & ~same])
  # log2(exp2(x)) may be x exactly for a backend within the bound: CMPEQ can flip there
  qs = got["out5"].astype(np.float64) * -1
  inside = (np.abs(qs - xs) <= corners["out5"]) & (corners["out5"] > 0)
  assert inside.any() and (closed["out10"][inside] == 1).all()


def test_the_bits_of_an_inexact_float_are_not_judged_and_of_an_exact_one_are():
  """BITCAST (and an integer from it) of an inexactly computed float: bound inf, so bits
  2 ulp away are accepted (tinygrad's test_multitensor test_bitcast); of an exact float: 0."""
  from tinyspec.interop.compare import compare
  b = Builder()
  x = b.param((8,), F32, 0, name="x")
  g = b.graph([b.BITCAST(b.SIN(x), arg="int32"), b.ADD(b.BITCAST(b.SIN(x), arg="int32"), b.const(1, "int32")),
               b.BITCAST(x, arg="int32")], level="tensor")
  xs = rng.standard_normal(8).astype(np.float32)
  got, bounds = evaluate_with_bounds(g, {"x": xs})
  assert np.isinf(bounds["out0"]).all() and np.isinf(bounds["out1"]).all() and (bounds["out2"] == 0).all()
  off = got["out0"] + 2   # 2 ulp of the float away
  assert compare(off, got["out0"], bounds["out0"]).ok and compare(got["out1"] + 2, got["out1"], bounds["out1"]).ok
  assert not compare(got["out2"] + 2, got["out2"], bounds["out2"]).ok


def test_a_value_stored_into_a_window_of_a_buffer_keeps_its_bound():
  """An assign into a window, as the importer writes it (tinygrad's test_shared_computation_
  assign_kernel_count): STORE(buf, WHERE(mask, PAD(x * 0.7), buf)) read back through
  AFTER(RESHAPE(buf), AFTER(SHRINK(...), STORE)). The read is ordered after the STORE through
  a nested AFTER: its bound must be the stored value's, not the untouched shadow's zero."""
  b = Builder()
  buf = b.buffer((6,), F32, 0, name="c")
  w = b.buffer((3,), F32, 1, name="w")
  full, off = b.shape(2, 3), b.vconst([0, 0], "index")
  cur = b.RESHAPE(buf, full)
  val = b.MUL(b.RESHAPE(w, b.shape(1, 3)), b.const(0.7, F32))
  mask = b.PAD(b.EXPAND(b.RESHAPE(b.const(True, "bool"), b.shape(1, 1)), b.shape(1, 3)), off, full)
  st = b.STORE(buf, b.RESHAPE(b.WHERE(mask, b.PAD(val, off, full), cur), b.shape(6)))
  g = b.graph([b.AFTER(cur, b.AFTER(b.SHRINK(cur, off, b.shape(1, 3)), st))], level="tensor")
  assert not validate(g).diagnostics
  ws = np.array([0.1, 0.2, 0.3], np.float32)
  got, bounds = evaluate_with_bounds(g, {"c": np.zeros(6, np.float32), "w": ws})
  np.testing.assert_array_equal(got["out0"][0], ws * np.float32(0.7))
  assert (bounds["out0"][0] > 0).all() and (bounds["out0"][1] == 0).all(), bounds["out0"]   # inexact products; the zeros kept


def test_a_quotient_by_a_sum_that_cancels_is_unbounded():
  """tinygrad's test_svd_general: t = 1 / (a0*b0 + a1*b1 + ...), a dot product of terms ~0.1
  that cancels to ~1e-9, whose sign the order of the additions (or an FMA) decides. The
  corners of the divisor's interval lie on both sides of the pole: they gave a finite bound
  that tinygrad's value (the other sign) broke. The bound is inf there, and stays the
  corners' finite value for a divisor clear of 0."""
  b = Builder()
  a = b.param((4,), F32, 0, name="a"); c = b.param((4,), F32, 1, name="c")
  dot = b.ADD(b.ADD(b.ADD(b.MUL(b.INDEX(a, idx(b, 0)), b.INDEX(c, idx(b, 0))), b.MUL(b.INDEX(a, idx(b, 1)), b.INDEX(c, idx(b, 1)))),
                    b.MUL(b.INDEX(a, idx(b, 2)), b.INDEX(c, idx(b, 2)))), b.MUL(b.INDEX(a, idx(b, 3)), b.INDEX(c, idx(b, 3))))
  g = b.graph([b.RECIP(dot), b.DIV(b.const(2.0, F32), dot)], level="tensor")
  terms = np.array([0.020363593, -0.09930995, 0.08163036, -0.0026839979], np.float32)   # the SVD's kernel: sums to ~4e-9
  _, bounds = evaluate_with_bounds(g, {"a": terms, "c": np.ones(4, np.float32)})
  assert np.isinf(bounds["out0"]) and np.isinf(bounds["out1"])
  _, clear = evaluate_with_bounds(g, {"a": np.abs(terms), "c": np.ones(4, np.float32)})
  assert np.isfinite(clear["out0"]) and 0 < clear["out0"] < 1e-5 and 0 < clear["out1"] < 1e-5
