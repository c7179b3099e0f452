"""One test per decision in spec/ops.yaml `decisions:`, named test_decision_<id>, holding
the reference evaluator to exactly what the decision says (a meta-test checks that every
decision has its test)."""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinyspec.tables import tables
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.numeric import NP

T = tables()
F32 = "float32"


def binop(op, dt, a, b, arg=None, out_dt=None):
  bld = Builder()
  x = bld.buffer((len(a),), dt, 0); y = bld.buffer((len(b),), dt, 1)
  bld.add(op, x, y, arg=arg)
  return evaluate(bld.graph(), {0: np.array(a, NP[dt]), 1: np.array(b, NP[dt])})["out0"]


def unop(op, dt, a, arg=None):
  bld = Builder()
  bld.add(op, bld.buffer((len(a),), dt, 0), arg=arg)
  return evaluate(bld.graph(), {0: np.array(a, NP[dt])})["out0"]


def bits_equal(x, y): return np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_every_decision_says_what_tinygrad_does():
  """Issue 14's bar: each decision has a basis and a why that says what tinygrad 0.14 does."""
  for k, d in T.decisions.items():
    assert d.get("basis") in ("seed001", "tinygrad", "chosen"), k
    assert "tinygrad 0.14" in (d.get("why") or ""), f"decision {k}: its why does not say what tinygrad 0.14 does"


def test_every_decision_has_a_test():
  names = {n for n in globals() if n.startswith("test_decision_")}
  missing = [d for d in T.decisions if "test_decision_" + d.replace("-", "_") not in names]
  assert not missing, f"decisions without a test: {missing}"


def test_decision_idiv_mod():
  a = [7, -7, 7, -7, 5, -128, -128, 0]
  b = [2, 2, -2, -2, 0, -1, 1, 3]
  q, r = binop("IDIV", "int8", a, b), binop("MOD", "int8", a, b)
  assert q.tolist() == [3, -4, -4, 3, 0, -128, -128, 0]
  assert r.tolist() == [1, 1, -1, -1, 5, 0, 0, 0]
  for x, y, qq, rr in zip(a, b, q.tolist(), r.tolist()):   # a == b*q + r, modulo 2^8
    assert (y * qq + rr - x) % 256 == 0


def test_decision_int_wrap():
  assert binop("ADD", "int32", [2**31 - 1], [1]).tolist() == [-2**31]
  assert binop("MUL", "uint8", [200], [2]).tolist() == [144]
  assert binop("SUB", "uint16", [0], [1]).tolist() == [65535]
  assert unop("NEG", "int64", [-2**63]).tolist() == [-2**63]
  assert binop("ADD", "index", [2**63 - 1], [1]).tolist() == [-2**63]
  bld = Builder()
  _r = bld.REDUCE(bld.buffer((3,), "int8", 0), arg={"op": "ADD", "axes": [0]})
  assert evaluate(bld.graph(), {0: np.array([100, 100, 100], np.int8)})["out0"].tolist() == [44]


def test_decision_shift():
  assert binop("SHL", "int8", [1, 1, 1, 3, -1], [7, 8, -1, 100, 1]).tolist() == [-128, 0, 0, 0, -2]
  assert binop("SHR", "int8", [-128, -128, 64, -1, 64], [7, 8, 9, -1, -3]).tolist() == [-1, -1, 0, -1, 0]
  assert binop("SHR", "uint32", [2**32 - 1, 2**32 - 1], [31, 32]).tolist() == [1, 0]


def test_decision_cast_float_int():
  # truncate, then wrap modulo 2^bits (tinygrad's PYTHON device: truncate[dtype](int(x))); NaN, ±inf: 0
  x = [1.9, -1.9, 300.0, -300.0, math.nan, math.inf, -math.inf, -0.0, 2.0**70, 3e9]
  assert unop("CAST", F32, x, arg="int8").tolist() == [1, -1, 44, -44, 0, 0, 0, 0, 0, 0]
  assert unop("CAST", "float64", [-5.0, 2.0**64, 2.0**63, -1.5, 2.0**64 + 2.0**13], arg="uint64").tolist() == [2**64 - 5, 0, 2**63, 2**64 - 1, 2**13]
  assert unop("CAST", "float64", [3e9, -1e10], arg="int32").tolist() == [3000000000 - 2**32, -10000000000 % 2**32 - 2**32]
  assert unop("CAST", F32, [0.0, -0.0, math.nan, 0.5], arg="bool").tolist() == [False, False, True, True]


def test_decision_cast_int_int():
  assert unop("CAST", "int32", [300, -1, 255, 2**31 - 1], arg="uint8").tolist() == [44, 255, 255, 255]
  assert unop("CAST", "uint16", [65535], arg="int16").tolist() == [-1]
  assert unop("CAST", "int64", [0, -5, 2**40], arg="bool").tolist() == [False, True, True]


def test_decision_cast_to_float():
  # ties to even: 2^24 + 1 and 2^24 + 3 are halfway between float32 neighbours
  assert unop("CAST", "int32", [2**24 + 1, 2**24 + 3], arg=F32).tolist() == [2.0**24, 2.0**24 + 4]
  assert unop("CAST", "float64", [1e300, -1e300], arg=F32).tolist() == [math.inf, -math.inf]
  assert unop("CAST", "float64", [1 + 2.0**-8 + 2.0**-40], arg="bfloat16").astype(np.float64).tolist() == [1 + 2.0**-7]
  assert unop("CAST", "bool", [True, False], arg="float16").tolist() == [1.0, 0.0]


def test_decision_bitcast_size():
  # tinygrad 0.14: float32 [1.0, -2.0] -> float16 [0, 1.875, 0, -2]; uint8 [1, 2, 3, 4] -> uint16 [513, 1027]
  bld = Builder()
  bld.BITCAST(bld.buffer((2, 2), F32, 0), arg="float16")
  out = evaluate(bld.graph(), {0: np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)})["out0"]
  assert out.shape == (2, 4) and out[0].tolist() == [0.0, 1.875, 0.0, -2.0]
  assert unop("BITCAST", "uint8", [1, 2, 3, 4], arg="uint16").tolist() == [513, 1027]
  assert unop("BITCAST", "uint16", [513, 1027], arg="uint8").tolist() == [1, 2, 3, 4]
  assert unop("BITCAST", "uint16", [0x100, 1], arg="bool").tolist() == [False, True, True, False]
  bld = Builder()
  _n = bld.BITCAST(bld.buffer((3,), "uint8", 0), arg="uint16")
  with pytest.raises(EvalError) as e:
    evaluate(bld.graph(), {0: np.zeros(3, np.uint8)})
  assert e.value.rule == "BITCAST.size"


def test_decision_bitcast_nan():
  payload = np.array([0x7FC01234, 0xFFA00001], np.uint32)
  out = unop("BITCAST", "uint32", payload.tolist(), arg=F32)
  assert bits_equal(out, payload)
  bld = Builder()
  bld.BITCAST(bld.BITCAST(bld.buffer((2,), "uint32", 0), arg=F32), arg="uint32")
  assert evaluate(bld.graph(), {0: payload})["out0"].tolist() == payload.tolist()
  assert unop("BITCAST", "uint8", [0, 1, 2, 255], arg="bool").tolist() == [False, True, True, True]


def test_decision_max_nan():
  # b if a < b else a: tinygrad's python_alu max and its C renderer's ((a<b)?b:a)
  out = binop("MAX", F32, [math.nan, 1.0, -0.0, 0.0, -0.0, 2.0], [1.0, math.nan, 0.0, -0.0, -0.0, 3.0])
  assert math.isnan(out[0]) and out[1] == 1.0 and out[5] == 3.0
  assert [math.copysign(1, v) for v in out[2:5].tolist()] == [-1, 1, -1]
  payload = _nan_bits(F32, 1, 5)
  assert bits_equal(binop("MAX", F32, payload, [1.0]), payload)   # a select keeps the operand's bits
  assert binop("MAX", "bool", [True, False, False], [False, True, False]).tolist() == [True, True, False]


def test_decision_cmp_nan():
  n = math.nan
  # seed 001: CMPGE = NOT(a < b) and CMPLE = NOT(b < a), true with a NaN (tinygrad: Tensor([nan]) >= 1 is True)
  for op, want in (("CMPLT", [False, False, False]), ("CMPNE", [True, True, False]), ("CMPGT", [False, False, False]),
                   ("CMPGE", [True, True, True]), ("CMPLE", [True, True, True]), ("CMPEQ", [False, False, True])):
    assert binop(op, F32, [n, 1.0, -0.0], [1.0, n, 0.0]).tolist() == want, op


def test_decision_float_div_zero():
  out = binop("DIV", F32, [1.0, -1.0, 0.0], [0.0, 0.0, 0.0])
  assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2])
  assert unop("RECIP", F32, [-0.0, 0.0]).tolist() == [-math.inf, math.inf]


def test_decision_float_arith():
  # float32 in float32: 1 + 2^-24 rounds back to 1 (float64 would keep it)
  assert binop("ADD", F32, [1.0], [2.0**-24]).tolist() == [1.0]
  # bfloat16 in float32, rounded once: 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7
  assert binop("ADD", "bfloat16", [1 + 2.0**-7], [-(2.0**-9)]).astype(np.float64).tolist() == [1 + 2.0**-7]
  # denormals are not flushed
  tiny = float(np.finfo(np.float32).smallest_subnormal)
  assert binop("MUL", F32, [tiny], [1.0]).tolist() == [tiny]
  assert unop("SQRT", F32, [2.0]).tolist() == [float(np.sqrt(np.float32(2.0)))]


def test_decision_transcendental_accuracy():
  assert unop("EXP2", F32, [-math.inf, math.inf]).tolist() == [0.0, math.inf]
  assert unop("LOG2", F32, [0.0, math.inf]).tolist() == [-math.inf, math.inf]
  assert all(math.isnan(v) for v in unop("LOG2", F32, [-1.0, math.nan]).tolist())
  assert all(math.isnan(v) for v in unop("SIN", F32, [math.inf, -math.inf, math.nan]).tolist())
  x = np.linspace(-20, 20, 4001, dtype=np.float32)
  want = np.exp2(x.astype(np.float64)).astype(np.float32)   # float64 then one rounding: the correctly rounded result
  got = unop("EXP2", F32, x.tolist())
  tol = T.tolerances["EXP2"]["ulp"]
  tol = tol["float32"] if isinstance(tol, dict) else tol
  assert np.max(np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32))) <= tol


def test_decision_pow_domain():
  # a^b with C99 Annex F's special values: (-2)^3 = -8 and x^0 = 1 as tinygrad gives them
  a = [-2.0, -2.0, 0.0, -0.0, 0.0, -0.0, 0.0, math.nan, math.inf, 1.0, 1.0, -1.0, 2.0, -2.0, -8.0]
  b = [3.0, 2.0, 3.0, 3.0, -1.0, -1.0, 0.0, 0.0, 0.0, math.inf, math.nan, math.inf, 10.0, 0.5, 1 / 3]
  out = binop("POW", F32, a, b).tolist()
  assert out[:2] == [-8.0, 4.0]
  assert out[2:4] == [0.0, -0.0] and [math.copysign(1, v) for v in out[2:4]] == [1, -1]
  assert out[4:6] == [math.inf, -math.inf]
  assert out[6:12] == [1.0] * 6
  assert out[12] == 1024.0 and math.isnan(out[13]) and math.isnan(out[14])


def test_decision_pad_fill():
  bld = Builder()
  bld.PAD(bld.buffer((2,), "bool", 0), bld.shape(1), bld.shape(4))
  assert evaluate(bld.graph(), {0: np.array([True, True])})["out0"].tolist() == [False, True, True, False]
  bld = Builder()
  bld.PAD(bld.buffer((2,), F32, 0), bld.shape(2), bld.shape(5))
  out = evaluate(bld.graph(), {0: np.array([3, -1], np.float32)})["out0"]
  assert out.tolist() == [0.0, 0.0, 3.0, -1.0, 0.0]


def test_decision_index_oob():
  bld = Builder()
  buf = bld.buffer((3,), "int32", 0)
  idx = bld.buffer((4,), "index", 1)
  bld.INDEX(buf, idx)
  out = evaluate(bld.graph(), {0: np.array([10, 20, 30], np.int32), 1: np.array([2, -1, 3, 0])})
  assert out["out0"].tolist() == [30, 0, 0, 10]
  # a STORE through an out-of-range index writes nothing
  bld = Builder()
  buf = bld.buffer((3,), "int32", 0)
  idx = bld.buffer((2,), "index", 1)
  tgt = bld.INDEX(buf, idx)
  bld.SINK(bld.STORE(tgt, bld.buffer((2,), "int32", 2)))
  out = evaluate(bld.graph(), {0: np.array([1, 2, 3], np.int32), 1: np.array([5, 1]), 2: np.array([7, 8], np.int32)})
  assert out["buf0"].tolist() == [1, 8, 3]
  # the same at kernel level, gate or no gate: the read gives zero, the STORE and the
  # ATOMICADD change nothing; strict_bounds (a debugging aid) refuses the ungated access
  for op in ("STORE", "ATOMICADD"):
    bld = Builder()
    x = bld.param((4,), "int32", 0)
    i = bld.range(3, 0)
    at = bld.MUL(i, bld.const(2, "index"))   # 0, 2, 4: the last is out of range
    bld.SINK(bld.END(bld.add(op, bld.INDEX(x, at), bld.ADD(bld.INDEX(x, bld.ADD(at, bld.const(1, "index"))), bld.const(10, "int32"))), i))
    xv = np.array([1, 2, 3, 4], np.int32)
    want = [12, 2, 14, 4] if op == "STORE" else [13, 2, 17, 4]   # x[5] reads 0, x[4] is not written
    assert evaluate(bld.graph(), {"param0": xv})["param0"].tolist() == want, op
    with pytest.raises(EvalError, match="out-of-bounds read") as e:
      evaluate(bld.graph(), {"param0": xv}, strict_bounds=True)
    assert e.value.rule == "eval.oob" and "(5,)" in str(e.value)


def test_decision_reduce_max():
  # the largest non-NaN element, +0 above -0, -inf when none (any order gives it)
  bld = Builder()
  bld.REDUCE(bld.buffer((5, 3), F32, 0), arg={"op": "MAX", "axes": [1]})
  x = np.array([[math.nan, 1, 3], [1, math.nan, 0], [-0.0, 0.0, -1], [math.nan] * 3, [-0.0, -0.0, -2]], np.float32)
  out = evaluate(bld.graph(), {0: x})["out0"].ravel().tolist()
  assert out[:4] == [3.0, 1.0, 0.0, -math.inf] and math.copysign(1, out[2]) == 1 and out[4] == 0.0 and math.copysign(1, out[4]) == -1
  # an explicit accumulator of elementwise MAX keeps max-nan's order: the first zero met, a NaN start stays
  from tinyspec.refimpl.loops import accumulate
  seq = accumulate("MAX", F32, np.array([-math.inf], np.float32), [np.array([[-0.0], [0.0], [math.nan], [2.0]], np.float32)], (0,))
  assert seq.ravel().tolist()[:3] == [-math.inf, 0.0, 0.0] and math.copysign(1, seq[2, 0]) == -1 and seq[-1, 0] == 2.0


def test_decision_denormals():
  tiny = float(np.finfo(np.float32).smallest_subnormal)
  assert binop("ADD", F32, [tiny], [0.0]).tolist() == [tiny]
  # the portable profile's `flush` variant: subnormal operands and results as zeros
  bld = Builder()
  bld.ADD(bld.buffer((2,), F32, 0), bld.buffer((2,), F32, 1))
  out = evaluate(bld.graph(), {0: np.array([tiny, 1.0], np.float32), 1: np.array([0.0, tiny], np.float32)}, variants=["flush"])["out0"]
  assert out.tolist() == [0.0, 1.0]
  bld = Builder()
  bld.PERMUTE(bld.buffer((1, 1), F32, 0), arg=[1, 0])   # moving data never flushes
  assert evaluate(bld.graph(), {0: np.array([[tiny]], np.float32)}, variants=["flush"])["out0"].tolist() == [[tiny]]


def test_decision_mulacc_rounding():
  a = np.array([1 + 2.0**-12], np.float32)
  c = np.array([-(1 + 2.0**-11)], np.float32)
  bld = Builder()
  bld.MULACC(bld.buffer((1,), F32, 0), bld.buffer((1,), F32, 1), bld.buffer((1,), F32, 2))
  ins = {0: a, 1: a, 2: c}
  assert evaluate(bld.graph(), ins)["out0"].tolist() == [0.0]                              # a*a rounds to 1 + 2^-11
  assert evaluate(bld.graph(), ins, variants=["fused"])["out0"].tolist() == [2.0**-24]      # one rounding keeps 2^-24
  assert evaluate(bld.graph(), ins, variants=["wide"])["out0"].tolist() == [2.0**-24]


def test_decision_half_intermediates():
  """Every float16 result is rounded (canonical); the `wide-intermediates` variant keeps a
  half product in float32 where an elementwise op reads it (a CAST to float32 sees the
  exact product, as tinygrad's __fp16 and its emulation give), and rounds what is output
  or cast to float16 explicitly."""
  h = np.float16
  a, b = np.array([1 + 2.0**-10, 3.0], h), np.array([1 + 2.0**-10, 1 + 2.0**-10], h)
  bld = Builder()
  x, y = bld.buffer((2,), "float16", 0), bld.buffer((2,), "float16", 1)
  m = bld.MUL(x, y)
  wide32 = bld.CAST(m, arg=F32)
  g = bld.graph([m, wide32, bld.CAST(bld.CAST(wide32, arg="float16"), arg=F32)], level="tensor")
  exact = a.astype(np.float64) * b
  canon = evaluate(g, {0: a, 1: b})
  assert canon["out1"].tolist() == exact.astype(h).astype(np.float32).tolist()
  wide = evaluate(g, {0: a, 1: b}, variants=["wide-intermediates"])
  assert wide["out0"].tolist() == canon["out0"].tolist() and wide["out0"].dtype == h   # the output itself is rounded
  assert wide["out1"].tolist() == exact.astype(np.float32).tolist() != canon["out1"].tolist()
  assert wide["out2"].tolist() == canon["out2"].tolist()   # an explicit CAST to float16 rounds


def test_decision_reduce_empty():
  for dt, op, want in (("float32", "ADD", 0.0), ("float32", "MUL", 1.0), ("float32", "MAX", -math.inf), ("int8", "MAX", -128),
                       ("uint16", "MAX", 0), ("bool", "MAX", False), ("int32", "MUL", 1)):
    bld = Builder()
    bld.REDUCE(bld.buffer((2, 0), dt, 0), arg={"op": op, "axes": [1]})
    assert evaluate(bld.graph())["out0"].tolist() == [[want], [want]], (dt, op)


def test_decision_reduce_one():
  """One element per result is itself: no axes, axes of size 1, a kernel RANGE of size 1."""
  x = np.array([[-0.0], [math.nan], [-1.5]], np.float32)
  for op in ("ADD", "MUL", "MAX"):
    for axes in ([], [1]):
      bld = Builder()
      bld.REDUCE(bld.buffer((3, 1), F32, 0), arg={"op": op, "axes": axes})
      assert bits_equal(evaluate(bld.graph(), {0: x})["out0"], x), (op, axes)
  bld = Builder()
  p = bld.param((1,), F32, 0)
  r = bld.range(1, 0)
  bld.REDUCE(bld.INDEX(p, r), r, arg={"op": "ADD"})
  got = evaluate(bld.graph(), {"param0": np.array([-0.0], np.float32)})["out0"]
  assert got.tolist() == 0.0 and math.copysign(1, float(got)) == -1
  bld = Builder()   # two elements still fold from the identity: 0 + -0.0 + -0.0 = +0.0
  bld.REDUCE(bld.buffer((1, 2), F32, 0), arg={"op": "ADD", "axes": [1]})
  assert math.copysign(1, float(evaluate(bld.graph(), {0: np.array([[-0.0, -0.0]], np.float32)})["out0"][0, 0])) == 1


def test_decision_where_cond():
  bld = Builder()
  bld.WHERE(bld.buffer((3,), "bool", 0), bld.const(1, "int32"), bld.const(2, "int32"))
  assert evaluate(bld.graph(), {0: np.array([True, False, True])})["out0"].tolist() == [1, 2, 1]
  for dt in ("float32", "int8"):   # tinygrad 0.14: "where cond must be bool"
    bld = Builder()
    bld.WHERE(bld.buffer((3,), dt, 0), bld.const(1, "int32"), bld.const(2, "int32"))
    with pytest.raises(EvalError) as e:
      evaluate(bld.graph(), {0: np.zeros(3, NP[dt])})
    assert e.value.rule == "dtype.allowed"


def test_decision_bool_arith():
  bld = Builder()
  bld.ADD(bld.const(True, "bool"), bld.const(True, "bool"))
  with pytest.raises(EvalError) as e:
    evaluate(bld.graph())
  assert e.value.rule == "dtype.allowed" and e.value.diagnostics


def test_decision_replicated_check():
  bld = Builder()
  bld.REPLICATED(bld.buffer((2, 3), F32, 0, device=("GPU:0", "GPU:1")), arg=[0])
  same = np.array([[1, 2, np.nan], [1, 2, np.nan]], np.float32)
  assert evaluate(bld.graph(), {0: same})["out0"].tolist()[0][:2] == [1.0, 2.0]
  with pytest.raises(EvalError, match="slices differ") as e:
    evaluate(bld.graph(), {0: np.array([[1, 2, 3], [1, 2, 4]], np.float32)})
  assert e.value.node == 2 and e.value.op == "REPLICATED"
  with pytest.raises(EvalError):   # -0.0 is not +0.0
    evaluate(bld.graph(), {0: np.array([[0.0], [-0.0]], np.float32).repeat(3, 1)})


def test_decision_store_order():
  bld = Builder()
  a = bld.buffer((2,), F32, 0)
  s1 = bld.STORE(a, bld.EXPAND(bld.RESHAPE(bld.const(1.0, F32), bld.shape(1)), bld.shape(2)))
  before = bld.ADD(a, bld.const(0.0, F32))                     # not ordered after s1: the input
  after = bld.ADD(bld.AFTER(a, s1), bld.const(0.0, F32))       # ordered after s1
  s2 = bld.STORE(bld.INDEX(a, bld.const(0, "index")), bld.const(5.0, F32))   # unordered with s1
  both = bld.ADD(bld.AFTER(a, s1, s2), bld.const(0.0, F32))  # both applied, in graph order: s1 then s2
  g = bld.graph(roots=[before, after, both, bld.SINK(s1, s2)])
  out = evaluate(g, {0: np.array([7, 7], np.float32)})
  assert out["out0"].tolist() == [7, 7] and out["out1"].tolist() == [1, 1] and out["out2"].tolist() == [5, 1]
  assert out["buf0"].tolist() == [5, 1]


def test_decision_kernel_loops():
  # x[i] += x[i-1] for i in 1..3 in place: a read through AFTER(x, r) sees the previous iteration's store
  bld = Builder()
  x = bld.param((4,), "int32", 0)
  r = bld.range(3, 0)
  i = bld.ADD(r, bld.const(1, "index"))
  ax = bld.AFTER(x, r)
  st = bld.STORE(bld.INDEX(ax, i), bld.ADD(bld.INDEX(ax, i), bld.INDEX(ax, r)))
  bld.SINK(bld.END(st, r))
  assert evaluate(bld.graph(), {"param0": np.array([1, 2, 3, 4], np.int32)})["param0"].tolist() == [1, 3, 6, 10]
  # without the RANGE in the AFTER, every iteration reads the input (no carried dependency)
  bld = Builder()
  x = bld.param((4,), "int32", 0)
  r = bld.range(3, 0)
  i = bld.ADD(r, bld.const(1, "index"))
  st = bld.STORE(bld.INDEX(x, i), bld.ADD(bld.INDEX(x, i), bld.INDEX(x, r)))
  bld.SINK(bld.END(st, r))
  assert evaluate(bld.graph(), {"param0": np.array([1, 2, 3, 4], np.int32)})["param0"].tolist() == [1, 3, 5, 7]


def _nan_bits(dt: str, sign: int, payload: int) -> np.ndarray:
  """A NaN of dtype dt with the given sign bit and (nonzero) mantissa payload."""
  from tinyspec.dtypes import DTYPES
  d = DTYPES[dt]
  u = np.dtype(f"uint{d.bits}")
  b = (sign << (d.bits - 1)) | (((1 << d.exponent) - 1) << d.mantissa) | payload
  return np.asarray([b], u).view(NP[dt])


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_decision_nan_canonical(dt):
  from tinyspec.dtypes import DTYPES
  d = DTYPES[dt]
  canon = np.asarray([d.nan], f"uint{d.bits}").view(NP[dt])
  assert np.isnan(canon).all() and d.nan == ((1 << d.exponent) - 1) << d.mantissa | 1 << (d.mantissa - 1)
  odd = _nan_bits(dt, 1, 1)                    # negative, signalling-looking payload 1
  inf, ninf = np.asarray([np.inf, -np.inf]).astype(NP[dt])
  one = np.asarray([1.0]).astype(NP[dt])
  # arithmetic, NaN made from numbers (inf - inf) or carried in from an operand
  assert bits_equal(binop("ADD", dt, [inf], [ninf]), canon)
  assert bits_equal(binop("MUL", dt, odd, one), canon)
  assert bits_equal(binop("MAX", dt, odd, one), odd)       # MAX selects (decision max-nan): the operand's bits
  assert bits_equal(unop("NEG", dt, odd), canon)            # a computed result: not a sign flip of the payload
  assert bits_equal(unop("SQRT", dt, -one), canon)
  assert bits_equal(unop("LOG2", dt, -one), canon)
  assert bits_equal(unop("CAST", dt, odd, arg="float32" if dt != "float32" else "float64"),
                    np.asarray([DTYPES["float32" if dt != "float32" else "float64"].nan], "uint32" if dt != "float32" else "uint64"))
  bld = Builder()
  bld.REDUCE(bld.buffer((3,), dt, 0), arg={"op": "ADD", "axes": [0]})
  got = evaluate(bld.graph(), {0: np.concatenate([one, odd, one])})["out0"]
  assert bits_equal(got, canon)
  # ops that move values keep the bits they read
  bld = Builder()
  p = bld.buffer((1,), "bool", 0)
  bld.add("WHERE", p, bld.buffer((1,), dt, 1), bld.buffer((1,), dt, 2))
  got = evaluate(bld.graph(), {0: np.array([True]), 1: odd, 2: one})["out0"]
  assert bits_equal(got, odd)
  bld = Builder()
  bld.PERMUTE(bld.buffer((1, 1), dt, 0), arg=[1, 0])
  assert bits_equal(evaluate(bld.graph(), {0: odd.reshape(1, 1)})["out0"], odd)


def test_decision_fp8_convert():
  # saturating: 1000 -> 448 (not NaN, as ml_dtypes own cast gives), 464 is the tie that rounds to 448
  got = unop("CAST", F32, [1000.0, -1e30, 464.0, 465.0, 0.3, float("inf"), float("nan"), -0.0], arg="float8_e4m3")
  assert got.view(np.uint8).tolist() == [0x7E, 0xFE, 0x7E, 0x7E, 0x2A, 0x7F, 0x7F, 0x80]   # 0.3 -> 0.3125
  # arithmetic computes in float32 and converts once: 448 * 2 saturates, 448 + 16 ties to even (448)
  assert binop("MUL", "float8_e4m3", [448.0, -448.0], [2.0, 2.0]).astype(np.float32).tolist() == [448.0, -448.0]
  assert binop("ADD", "float8_e4m3", [448.0], [16.0]).astype(np.float32).tolist() == [448.0]
  # float8_e5m2 keeps its infinities but saturates a finite overflow; fnuz has no -0.0 and one NaN
  assert unop("CAST", F32, [1e9, float("-inf")], arg="float8_e5m2").view(np.uint8).tolist() == [0x7B, 0xFC]
  assert unop("CAST", F32, [-0.0, -1e-30, float("inf"), 1e9], arg="float8_e4m3fnuz").view(np.uint8).tolist() == [0, 0, 0x80, 0x7F]
