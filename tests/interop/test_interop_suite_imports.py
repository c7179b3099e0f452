"""Import forms that tinygrad's own test suite showed missing (issue 31; docs/tinygrad-suite.md),
each from a small real program: every graph validates and evaluates to tinygrad's values.

  int division     RECIPROCAL of an int divisor with a float result: RECIP(CAST(b, float32))
  int functions    SQRT, EXP2, LOG2, SIN of an int tensor with a float result: op(CAST(x, float32))
  int pow          x ** c of an int tensor: tinygrad's square and multiply (simplify_pow),
                   never the float template (whose -inf constant has no int value)
  dropped param    a lowered program that no longer reads one of its kernel's buffers: the
                   inputs it is given are the ones it holds (tinyspec eval refuses others)
  multi-device     tinygrad's UNSHARD over a DEVICE range and COPY to a tuple of devices: the
                   shards joined, the spec's BUFFER on n devices, the broadcast
  calls            FUNCTION's CallInfo, Tensor.callify's CALL of a tensor-level SINK, a
                   precompiled function's INDEX of a RESHAPE
  Tensor.empty     a kernel reading a buffer allocated for it: the contents it read
  weak converted   CAST(weak float, float64) in a lowered program: rounded once, to float64

Skipped without tinygrad. tinygrad runs on CPU where clang is installed, else PYTHON.
"""
import os
import shutil
import textwrap
import numpy as np
import pytest

os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
pytest.importorskip("tinygrad")

from tinygrad import Device, Tensor, dtypes   # noqa: E402
from tinygrad.uop.ops import Ops, UOp   # noqa: E402
from tinyspec.interop.script import import_script   # noqa: E402
from tinyspec.interop.tinygrad_import import import_uops   # noqa: E402
from tinyspec.refimpl import evaluate   # noqa: E402
from tinyspec.validate import validate   # noqa: E402


def _script(tmp_path, source: str):
  p = tmp_path / "program.py"
  p.write_text(textwrap.dedent(source))
  res = import_script(p)
  assert res.error is None, res.error
  for g in res.graphs:
    assert g.valid, f"{g.name}: {[d.format() for d in g.diagnostics]}"
    assert g.eval_ok, f"{g.name}: {g.evaluation}"
  return res


def test_int_division_is_recip_of_a_cast(tmp_path):
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    a = Tensor([7, -7, 9, 1], dtype=dtypes.int32); b = Tensor([2, 2, 4, -3], dtype=dtypes.int32)
    print((a / b).numpy())
  """)
  for g in (g for g in res.graphs if g.level in ("tensor", "kernel")):
    recips = [n for n in g.graph.nodes if n.op == "RECIP"]
    assert recips and all(g.graph.nodes[n.src[0]].op == "CAST" for n in recips), g.name
  assert res.report.forms["RECIPROCAL of int32 as RECIP(CAST float32)"] >= 2


def test_float_functions_of_ints_take_a_cast(tmp_path):
  """Tensor.sqrt/exp/log/sin of ints (test_dtype_spec's autocast tests): tinygrad's SQRT, EXP2,
  LOG2 and SIN of the int tensor with a float32 result."""
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    for dt in (dtypes.int32, dtypes.uint8, dtypes.int64):
      t = Tensor([1, 4, 9, 2], dtype=dt)
      Tensor.realize(t.sqrt(), t.exp2(), t.exp(), t.log2(), t.sin(), t.rsqrt())
  """)
  for op in ("SQRT", "EXP2", "LOG2", "SIN"):
    for dt in ("int32", "uint8", "int64"):
      assert res.report.forms[f"{op} of {dt} as {op}(CAST float32)"] >= 1, (op, dt, dict(res.report.forms))


def test_int_pow_is_square_and_multiply(tmp_path):
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    x = Tensor([-2, 0, 2, 3], dtype=dtypes.int32)
    for c in (0, 1, 2, 7, 29): print((x ** c).numpy())
    print((Tensor([3, -5, 7], dtype=dtypes.int8) ** 5).numpy())   # wraps, as int8 MUL does
  """)
  assert res.report.forms["POW of integers as square and multiply"] == 6
  assert not any(n.op == "POW" for g in res.graphs for n in g.graph.nodes)


def test_int_pow_of_a_tensor_exponent_is_refused_not_raised():
  """tinygrad runs no int POW but x ** c (its renderers have no code for it): kept as POW,
  reported, refused by the validator (dtype.allowed)."""
  x = UOp.param(0, dtypes.int32, (3,), device="CPU")
  g, rep = import_uops([x.alu(Ops.POW, UOp.param(1, dtypes.int32, (3,), device="CPU"))], "tensor")
  assert any("POW of integers" in k for k in rep.unmapped)
  assert "dtype.allowed" in {d.rule for d in validate(g).diagnostics}


def test_a_program_gets_only_the_buffers_it_reads(tmp_path):
  """QR of a 2x2x2x2x2 tensor: tinygrad's lowering drops a load of some kernels (their buffer
  is still bound); each program evaluates on its own inputs, which name only its PARAMs."""
  res = _script(tmp_path, """
    import numpy as np
    from tinygrad import Tensor
    a = Tensor(np.random.default_rng(0).standard_normal((2, 2, 2, 2, 2)).astype(np.float32)).realize()
    Tensor.realize(*a.qr())
  """)
  kernels = {g.name: g for g in res.graphs if g.level == "kernel"}
  dropped = [g for g in res.graphs if g.level == "program" and set(g.inputs) < set(kernels[g.name.replace("program", "kernel")].inputs)]
  assert dropped, "no program of the QR dropped a kernel's buffer: the case is not exercised"
  for g in dropped:
    params = {n.arg.get("name") or f"param{n.arg['slot']}" for n in g.graph.nodes if n.op == "PARAM"}
    assert set(g.inputs) == params


# ------------------------------------------------------------------ multi-device
DEVS = tuple(f"{Device.DEFAULT}:{k}" for k in range(2))


def _multi_eval(t: Tensor):
  """Import t's tensor graph; its inputs: each BUFFER's contents, a multi-device one as its
  shards one after another (the device order)."""
  g, rep = import_uops([t.uop], "tensor")
  res = validate(g)
  assert res.ok, [d.format() for d in res.diagnostics]
  ins = {}
  for u in t.uop.toposort():
    if u.op is Ops.BUFFER and u.is_realized:
      b = u.buffer
      ins[f"buf{u.arg.slot}"] = np.concatenate([x.numpy() for x in b.bufs]) if hasattr(b, "bufs") else b.numpy()
  want = t.numpy()
  np.testing.assert_array_equal(evaluate(g, ins)["out0"], want)
  return g, rep


@pytest.mark.parametrize("axis", [0, 1])
def test_sharded_tensor_is_its_shards_joined(axis):
  x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 4, 3))
  t = x.shard(DEVS, axis=axis)
  g, rep = _multi_eval((t * 2).sum(2))
  assert rep.forms["UNSHARD as the devices' shards joined"] == 1 and rep.forms["COPY to a tuple of devices as the broadcast"] == 1
  t.realize()
  g, rep = _multi_eval(t + 1)
  whole = [g.nodes[n.src[0]].arg for n in g.nodes if n.op == "BUFFER" and isinstance(n.arg.get("device"), (list, tuple))]
  assert whole == [{"value": 24, "dtype": "index"}], "the spec's BUFFER on n devices holds all n shards"


def test_per_device_buffers_joined_by_an_unshard():
  """Tensor.full_like of a sharded tensor: UNSHARD(MSTACK(one buffer per device)): device d's
  value is MSTACK's source d, each COPYed onto the n devices before the join."""
  t = Tensor.ones(4, 4).contiguous().shard(DEVS, axis=0).realize()
  g, rep = _multi_eval(Tensor.full_like(t, 2.0))
  assert rep.forms["COPY to a tuple of devices as the broadcast"] == 2 and not rep.unmapped


def test_a_replicated_buffer_read_and_assigned():
  """A BUFFER on n devices outside an UNSHARD: every device holds all of it (tinygrad's axis
  None): read as REPLICATED of its n copies, assigned into every copy (clone)."""
  t = Tensor(np.arange(16, dtype=np.int32).reshape(4, 4)).to(DEVS).contiguous().realize()
  g, rep = _multi_eval(t.clone())
  assert rep.forms["BUFFER on n devices outside an UNSHARD as replicated"] >= 1
  assert rep.forms["assign into a replicated BUFFER: every device's copy"] == 1


def test_sharded_matmul_and_a_replicated_copy():
  w = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3)).shard(DEVS, axis=0)
  x = Tensor(np.ones((2, 4), np.float32)).to(DEVS)
  g, rep = _multi_eval(x @ w)
  assert rep.forms["UNSHARD as the devices' shards joined"] == 1 and "REPLICATED" in {n.op for n in g.nodes}


# ------------------------------------------------------------------ calls
def test_calls_and_callify_import(tmp_path):
  res = _script(tmp_path, """
    import numpy as np
    from tinygrad import Tensor, function, dtypes
    from tinygrad.uop.ops import UOp
    a = Tensor(np.arange(32, dtype=np.float32).reshape(4, 8)).realize()
    plus = UOp.param(0, dtypes.float, (4, 8)) + UOp.param(1, dtypes.float, (4, 8))
    print(Tensor.call(a, a, fxn=plus).numpy()[0])          # FUNCTION with its CallInfo
    @function(precompile=True)
    def s(x): return x * 2
    print((s(a) * 3).numpy()[0])                            # a precompiled kernel: INDEX(RESHAPE(PARAM), i, j)
    out = Tensor([1., 2, 3]) + Tensor([4., 5, 6])
    out.callify()                                           # CALL of a tensor-level SINK
    out.callify()                                           # ... holding a CALL of its own PARAMs
    print(out.tolist())
  """)
  for form in ("FUNCTION arg (CallInfo) dropped", "INDEX of a view (RESHAPE) as an INDEX of its buffer", "CALL of a tensor-level SINK (callify) inlined"):
    assert res.report.forms[form] >= 1, form


def test_a_kernel_reading_an_empty_buffer_gets_what_it_read(monkeypatch, tmp_path):
  """Tensor.empty's memory holds whatever it held (here: planted 7.0s, as a reused allocation
  would); the kernel reads it, so its inputs are those contents, not zeros."""
  from tinygrad.device import Buffer
  allocate = Buffer.allocate

  def planted(self, opaque=None, external_ptr=None):
    allocate(self, opaque, external_ptr)
    if opaque is None and external_ptr is None and self.dtype == dtypes.float32:
      self.allocator._copyin(self._buf, memoryview(bytearray(np.full(self.size, 7.0, np.float32).tobytes())))
    return self
  monkeypatch.setattr(Buffer, "allocate", planted)
  res = _script(tmp_path, """
    from tinygrad import Tensor, function
    @function(precompile=True)
    def s(x): return x * 2
    print((s(Tensor.empty(4, 8)) * 3).numpy()[0])
  """)
  assert any(np.all(a == 7.0) for g in res.graphs if g.level == "kernel" for a in g.inputs.values())


def test_a_multi_device_kernel_imports_as_one_devices_graph():
  """tinygrad runs a multi-device call's kernel once per device; each run is one ordinary
  graph: its PARAMs on that device, a DEVICE range (a sharded matmul's) that device's number."""
  a = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)).shard(DEVS, axis=0).realize()
  b = Tensor(np.ones((4, 4), np.float32)).shard(DEVS, axis=0).realize()
  bodies = [c.src[0] for c in (a @ b).schedule_linear().src if c.src[0].op is Ops.SINK]
  body = next(k for k in bodies if any(u.op is Ops.RANGE and u.arg[-1].name == "DEVICE" for u in k.toposort()))
  devices = next(u.arg.device for u in body.toposort() if u.op is Ops.PARAM and isinstance(u.arg.device, tuple))
  for d, device in enumerate(devices):
    g, rep = import_uops([body], "kernel", device=device)
    assert validate(g).ok and not rep.unmapped
    assert {n.arg["device"] for n in g.nodes if n.op == "PARAM"} == {device}
    assert not any(n.op == "RANGE" and n.arg["type"] == "DEVICE" for n in g.nodes)
    assert rep.forms["DEVICE range of one device's kernel as its number"] == 1 and {"value": d, "dtype": "index"} in [n.arg for n in g.nodes if n.op == "CONST"]


def test_a_weak_where_beside_invalid_adopts_the_stored_dtype(tmp_path):
  """avg_pool2d with ceil_mode, its gradient (test_avg_pool2d_ceil_mode_output_size_reduce_by_one):
  tinygrad's kernel stores WHERE(valid, WHERE(c, 1/9, 0.0), Invalid) with weakfloat branches
  and an Invalid typed bool; the weak branch adopts the stored float32, not Invalid's bool
  (which made WHERE(c, True, False) beside a float32, [dtype.match])."""
  res = _script(tmp_path, """
    import numpy as np
    from tinygrad import Tensor
    x = Tensor(np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) / 7)
    g, = x.avg_pool2d(kernel_size=(3, 3), stride=3, padding=1, ceil_mode=True).sum().gradient(x)
    print(g.numpy())
  """)
  kernel = next(g for g in res.graphs if g.level == "kernel")
  ninth = [n for n in kernel.graph.nodes if n.op == "CONST" and n.arg["value"] != 0 and abs(float(n.arg["value"]) - 1 / 9) < 1e-7]
  assert ninth and all(n.arg["dtype"] == "float32" for n in ninth)


def test_symbolic_shapes_of_bound_variables_import_at_their_values(tmp_path):
  """A realize with bound Variables (tinygrad's test_deviceless_materialize_localizes_to_target,
  test_symbolic_ops' cat of two variables, ones of a symbolic shape): the spec has no symbolic
  shape at tensor level, so each dim is the number tinygrad ran with; each binding imports,
  validates and agrees (two bindings of the same program give two results)."""
  res = _script(tmp_path, """
    import numpy as np
    from tinygrad import Tensor, Variable
    a = Tensor(np.arange(30, dtype=np.float32).reshape(3, 10))
    for i, j in ((3, 2), (5, 4)):
      vi, vj = Variable("i", 1, 10).bind(i), Variable("j", 1, 10).bind(j)
      print(Tensor.arange(Variable("s", 1, 128).bind(2 * i)).cumsum()[:2 * i].numpy())
      print(Tensor.ones(vi, 11).contiguous().sum().item())
      print(a[:, :vi].cat(a[:, :vj], dim=1).sum(1).numpy())
  """)
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert len(tensors) >= 6 and all(not g.report.unmapped for g in tensors)
  assert sum(g.report.forms["symbolic dim of a bound variable as its bound value"] for g in tensors) >= 6


def test_a_dim_has_a_number_only_where_its_variables_are_bound():
  from tinyspec.interop.tinygrad_symbolic import bound_value
  v = UOp.variable("i", 1, 10)
  assert bound_value(v.bind(3) * 2 - 1) == 5 and bound_value(7) == 7
  assert bound_value(v * 2 - 1) is None   # unbound: no number, the dim stays symbolic


def test_a_weak_float_is_the_default_float_of_its_realize(tmp_path):
  """tinygrad's weak float stands for DEFAULT_FLOAT when the realize ran (test_dtype_spec's
  Context(DEFAULT_FLOAT=...)): a float64 default keeps 2.34's float64 value, not float32's."""
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    from tinygrad.helpers import Context
    with Context(DEFAULT_FLOAT="float64"):
      print(Tensor(2.34).numpy(), Tensor.arange(3, 9, 0.7).numpy(), (Tensor([1.0]) + 0.1).numpy())
  """)
  tensors = [g for g in res.graphs if g.level == "tensor"]   # every graph agrees with tinygrad (_script)
  consts = [n for g in tensors for n in g.graph.nodes if n.op == "CONST" and isinstance(n.arg.get("value"), float)]
  assert consts and all(n.arg["dtype"] == "float64" for n in consts), [n.arg for n in consts]


def test_a_weak_float_converted_to_float64_keeps_its_float64_value(tmp_path):
  """tinygrad's lowered program of a float64 tensor plus 1 + 2**-40 (test_dtype_weak's
  test_float64_precision) holds CAST(CONST weakfloat, float64): the number is rounded once,
  to float64 (the C text has the double literal), not to float32's 1.0 first; a float32
  tensor plus the same number still rounds it to float32 (weak_converted in the map)."""
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    value = 1.0 + 2**-40
    assert (Tensor.full((1,), 1.0, dtype=dtypes.float64) + value).item() == 2.0 + 2**-40
    assert (Tensor.full((1,), 0.0, dtype=dtypes.float32) + value).item() == 1.0
  """)   # every graph, the lowered programs included, agrees with tinygrad (_script)
  programs = [g for g in res.graphs if g.level == "program"]
  consts = {n.arg["dtype"]: n.arg["value"] for g in programs for n in g.graph.nodes if n.op == "CONST" and n.arg["dtype"].startswith("float")}
  assert consts.get("float64") == 1.0 + 2**-40, consts


def test_a_cast_to_a_weak_float_converts_to_the_dtype_its_node_adopts(tmp_path):
  """int64 + uint64 meet at a weak float, CAST(int64, weakfloat), which a float16 consumer
  converts to float16 (test_dtype_weak's test_weakfloat_lowers; with DEFAULT_FLOAT float16, a
  float32 consumer: test_cast_weak_expression_value_uses_cast_floor): the CAST's target is
  the dtype its node adopts, so its declared and derived dtypes agree."""
  res = _script(tmp_path, """
    from tinygrad import Tensor, dtypes
    from tinygrad.helpers import Context
    i64, u64 = Tensor([-1], dtype=dtypes.int64, device="CPU"), Tensor([3], dtype=dtypes.uint64, device="CPU")
    assert (i64 + u64 + Tensor([2], dtype=dtypes.float16, device="CPU")).cast(dtypes.float32).item() == 4.0
    with Context(DEFAULT_FLOAT=dtypes.float16):
      denom = Tensor.ones(1, dtype=dtypes.int32, device="CPU").sum() * 70000 + 1e-5
      assert abs((Tensor(1.0, dtype=dtypes.float32, device="CPU") / denom).item() - 1 / (70000 + 1e-5)) < 1e-10
  """)   # every graph validates and agrees with tinygrad (_script)
  casts = [n for g in res.graphs if g.level == "tensor" for n in g.graph.nodes if n.op == "CAST"]
  assert casts and all(n.arg == n.dtype for n in casts if n.dtype is not None), [(n.arg, n.dtype) for n in casts]
