"""The lazy Tensor: every method builds the spec's ops, the graphs validate, and the
properties the front end derives node by node equal the validator's."""
import numpy as np
import pytest
from tinyspec.tensor import Tensor, GraphError
from tinyspec.frontend.tensor import bound_inputs
from tinyspec.frontend.walk import toposort
from tinyspec.tables import PROPS
from tinyspec.validate import validate


def check_graph(t: Tensor):
  """t's graph validates and the props the front end derived node by node, as it built
  them, equal the validator's (the graph lists the front end's UOps in the same order)."""
  g = t.graph()
  res = validate(g)
  assert res.ok, [d.format() for d in res.diagnostics]
  built = toposort([t.uop])
  assert [u.op for u in built] == [n.op for n in g.nodes]
  for u, v in zip(built, res.views):
    for p in PROPS:
      assert repr(getattr(u._props, p)) == repr(getattr(v, p)), (u, p)
  return g


def value(t: Tensor) -> np.ndarray:
  """t evaluated by the reference evaluator (the default backend)."""
  return t.numpy()


def ops_of(t: Tensor) -> list[str]:
  return [n.op for n in t.graph().nodes]


F = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
I = np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4)


# ------------------------------------------------------------------ constructors
def test_numpy_becomes_bound_buffer():
  t = Tensor(F)
  assert t.uop.op == "BUFFER" and t.shape == (2, 3, 4) and t.dtype == "float32" and t.device == "CPU"
  (name, data), = bound_inputs([t.uop]).items()
  assert name == "buf0" and data is not F and np.array_equal(data, F)
  assert Tensor(F).uop is not t.uop   # each array is its own buffer (fresh slot)
  check_graph(t)


@pytest.mark.parametrize("data,dtype", [([1, 2], "int32"), ([1.5, 2], "float32"), ([True, False], "bool"),
                                        (np.arange(3, dtype=np.int64), "int64"), (np.zeros(2, np.float16), "float16"),
                                        (np.zeros(2, np.uint8), "uint8")])
def test_constructor_dtypes(data, dtype):
  assert Tensor(data).dtype == dtype


def test_constructor_dtype_and_device_args():
  t = Tensor([1, 2, 3], dtype="float16", device="GPU")
  assert (t.dtype, t.device) == ("float16", "GPU")
  D = ("GPU:0", "GPU:1")
  m = Tensor(np.zeros((4, 3), np.float32), device=D)
  assert m.device == D and m.axis == 0 and m.shape == (4, 3)
  with pytest.raises(GraphError, match="BUFFER.shard"): Tensor(np.zeros(3, np.float32), device=D)


def test_scalar_is_const():
  assert Tensor(1).uop.arg == {"value": 1, "dtype": "int32"} and Tensor(1).shape == ()
  assert Tensor(1.5).dtype == "float32" and Tensor(True).dtype == "bool"
  assert Tensor(2, dtype="float64").uop.arg == {"value": 2.0, "dtype": "float64"}
  assert Tensor(float("nan")).uop.arg["value"] == "nan"
  assert Tensor(1).device is None   # a CONST goes anywhere


def test_full_is_const_reshape_expand():
  t = Tensor.full((2, 3), 7)
  assert ops_of(t) == ["CONST", "VCONST", "RESHAPE", "VCONST", "EXPAND"]
  assert t.shape == (2, 3) and t.dtype == "int32" and t.min_max == (7, 7)
  assert Tensor.full((), 1.0).uop.op == "CONST"
  z = Tensor.zeros(4, dtype="float16", device="CPU")
  assert z.uop.op == "COPY" and z.device == "CPU" and z.dtype == "float16"
  assert Tensor.ones(2, 2).dtype == "float32"
  check_graph(t)


def test_empty():
  t = Tensor.empty(2, 5, dtype="int8")
  assert t.uop.op == "BUFFER" and t.shape == (2, 5) and t.dtype == "int8"
  (data,) = bound_inputs([t.uop]).values()
  assert data.dtype == np.int8 and not data.any()


# ------------------------------------------------------------------ movement
@pytest.mark.parametrize("build,ref", [
  (lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
  (lambda t: t.reshape(-1, 2), lambda a: a.reshape(-1, 2)),
  (lambda t: t.reshape((4, -1)), lambda a: a.reshape(4, -1)),
  (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
  (lambda t: t.permute(-1, 0, 1), lambda a: a.transpose(2, 0, 1)),
  (lambda t: t.transpose(), lambda a: a.swapaxes(1, 0)),
  (lambda t: t.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
  (lambda t: t.flip(1), lambda a: a[:, ::-1]),
  (lambda t: t.flip((0, 2)), lambda a: a[::-1, :, ::-1]),
  (lambda t: t.reshape(2, 1, 12).expand(2, 5, 12), lambda a: np.broadcast_to(a.reshape(2, 1, 12), (2, 5, 12))),
  (lambda t: t.reshape(1, 24).expand(3, -1), lambda a: np.broadcast_to(a.reshape(1, 24), (3, 24))),
  (lambda t: t.reshape(24).expand(2, 24), lambda a: np.broadcast_to(a.reshape(24), (2, 24))),
  (lambda t: t.pad(((1, 0), None, (2, 3))), lambda a: np.pad(a, ((1, 0), (0, 0), (2, 3)))),
  (lambda t: t.pad((2, 3)), lambda a: np.pad(a, ((0, 0), (0, 0), (2, 3)))),
  (lambda t: t.pad((2, 3, 1, 0)), lambda a: np.pad(a, ((0, 0), (1, 0), (2, 3)))),
  (lambda t: t.pad_to(3, 4, 6, offset=(1, 0, 2)), lambda a: np.pad(a, ((1, 0), (0, 1), (2, 0)))),
  (lambda t: t.pad_to(2, 5, 4), lambda a: np.pad(a, ((0, 0), (0, 2), (0, 0)))),
  (lambda t: t.shrink(((1, 2), None, (1, 3))), lambda a: a[1:2, :, 1:3]),
  (lambda t: t.shrink_to(1, 2, 3), lambda a: a[:1, :2, :3]),
  (lambda t: t.shrink_to(1, 2, 3, offset=(1, 1, 1)), lambda a: a[1:2, 1:3, 1:4]),
  (lambda t: t[1], lambda a: a[1]),
  (lambda t: t[-1, 2], lambda a: a[-1, 2]),
  (lambda t: t[:, 1], lambda a: a[:, 1]),
  (lambda t: t[..., 3], lambda a: a[..., 3]),
  (lambda t: t[0, 1:3], lambda a: a[0, 1:3]),
  (lambda t: t[:, ::2], lambda a: a[:, ::2]),
  (lambda t: t[:, :, ::-1], lambda a: a[:, :, ::-1]),
  (lambda t: t[:, [2, 0, 0]], lambda a: a[:, [2, 0, 0]]),
  (lambda t: t[[1, 0], :, [3, 1]], lambda a: a[np.ix_([1, 0], range(3), [3, 1])]),
  (lambda t: t[None, 1, None, :, 2], lambda a: a[None, 1, None, :, 2]),
  (lambda t: t[1:1], lambda a: a[1:1]),
  (lambda t: t.stack(t), lambda a: np.stack([a, a])),
  (lambda t: Tensor.stack(t, t, t, dim=2), lambda a: np.stack([a, a, a], axis=2)),
  (lambda t: t.stack(t, dim=-1), lambda a: np.stack([a, a], axis=-1)),
])
def test_movement(build, ref):
  t = build(Tensor(F))
  want = ref(F)
  assert t.shape == want.shape and t.dtype == "float32"
  check_graph(t)
  np.testing.assert_array_equal(value(t), want)


def test_movement_ops_are_the_spec_ops():
  t = Tensor(F)
  assert t.reshape(24).uop.op == "RESHAPE" and t.permute(1, 0, 2).uop.op == "PERMUTE"
  assert t.flip(0).uop.arg == (True, False, False)
  p = t.pad((1, 2))
  assert p.uop.op == "PAD" and [s.arg["values"] for s in p.uop.src[1:]] == [(0, 0, 1), (2, 3, 7)]
  s = t.shrink_to(1, 1, 1, offset=(1, 2, 3))
  assert s.uop.op == "SHRINK" and [x.arg["values"] for x in s.uop.src[1:]] == [(1, 2, 3), (1, 1, 1)]
  assert t[0].uop.op == "INDEX" and t[0].uop.src[1].arg == {"value": 0, "dtype": "index"}
  assert t.bitcast("int32").uop.op == "BITCAST" and t.bitcast("int32").dtype == "int32"
  assert t.stack(t).uop.op == "STACK"


def test_index_with_tensors():
  idx = Tensor(np.array([2, 0], np.int32))
  t = Tensor(F)[:, idx]
  assert t.shape == (2, 2, 4)
  check_graph(t)
  s = Tensor(F)[Tensor(np.int32(1))]
  assert s.shape == (3, 4) and s.uop.op == "INDEX"
  with pytest.raises(IndexError): Tensor(F)[Tensor(np.zeros((2, 2), np.int32))]


def test_index_errors():
  t = Tensor(F)
  with pytest.raises(IndexError): t[2]
  with pytest.raises(IndexError): t[0, 0, 0, 0]
  with pytest.raises(IndexError): t[..., 0, ...]
  with pytest.raises(IndexError): t[:, [5]]


def test_movement_errors_name_the_rule():
  t = Tensor(F)
  with pytest.raises(GraphError, match=r"RESHAPE\.numel"): t.reshape(5, 5)
  with pytest.raises(ValueError): t.reshape(-1, -1)
  with pytest.raises(GraphError, match=r"EXPAND\.dims"): t.expand(2, 3, 5)
  with pytest.raises(GraphError, match=r"PERMUTE\.perm"): t.permute(0, 0, 1)
  with pytest.raises(GraphError, match=r"SHRINK\.bounds"): t.shrink_to(3, 3, 4)
  with pytest.raises(GraphError, match=r"BITCAST\.size"): Tensor(np.zeros(3, np.uint8)).bitcast("int16")   # 3 bytes: no whole int16s
  assert t.bitcast("int8").shape == (2, 3, 16)   # decision bitcast-size: the last axis rescales
  with pytest.raises(GraphError, match=r"STACK\.shapes"): t.stack(t.reshape(24))


# ------------------------------------------------------------------ elementwise
BINARY = [("__add__", "ADD"), ("__sub__", "SUB"), ("__mul__", "MUL"), ("__floordiv__", "IDIV"), ("__mod__", "MOD"),
          ("__and__", "AND"), ("__or__", "OR"), ("__xor__", "XOR"), ("__lshift__", "SHL"), ("__rshift__", "SHR"),
          ("__eq__", "CMPEQ"), ("__ne__", "CMPNE"), ("__lt__", "CMPLT"), ("__le__", "CMPLE"), ("__gt__", "CMPGT"),
          ("__ge__", "CMPGE"), ("maximum", "MAX")]


@pytest.mark.parametrize("method,op", BINARY)
def test_binary_ops_build_their_own_node(method, op):
  a, b = Tensor(I), Tensor(I[::-1].copy())
  t = getattr(a, method)(b)
  assert t.uop.op == op and t.uop.src == (a.uop, b.uop)
  assert t.dtype == ("bool" if op.startswith("CMP") else "int32") and t.shape == (2, 3, 4)
  s = getattr(a, method)(3)   # a Python scalar is a CONST of the tensor's dtype
  assert s.uop.src[1].op == "CONST" and s.uop.src[1].arg == {"value": 3, "dtype": "int32"}
  check_graph(t); check_graph(s)


@pytest.mark.parametrize("method,op", [("__truediv__", "DIV"), ("__pow__", "POW"), ("__add__", "ADD")])
def test_float_binary_and_reverse(method, op):
  a = Tensor(F)
  assert getattr(a, method)(2).uop.src[1].arg == {"value": 2.0, "dtype": "float32"}
  r = getattr(a, method.replace("__", "__r", 1))(2)
  assert r.uop.op == op and r.uop.src[0].op == "CONST" and r.uop.src[1] is a.uop
  check_graph(r)


def test_reverse_operators_keep_operand_order():
  a = Tensor(I)
  assert (1 - a).uop.src[0].arg["value"] == 1 and (1 - a).uop.op == "SUB"
  assert (2 * a).uop.op == "MUL" and (7 // a).uop.op == "IDIV" and (1 << a).uop.op == "SHL"


@pytest.mark.parametrize("method,op", [("exp2", "EXP2"), ("log2", "LOG2"), ("sin", "SIN"), ("sqrt", "SQRT"),
                                       ("recip", "RECIP"), ("trunc", "TRUNC"), ("__neg__", "NEG")])
def test_unary_ops(method, op):
  t = getattr(Tensor(F), method)()
  assert t.uop.op == op and t.shape == F.shape and t.dtype == "float32"
  check_graph(t)


def test_cast_where_not_invert():
  a = Tensor(I)
  c = a.cast("float16")
  assert c.uop.op == "CAST" and c.dtype == "float16" and a.cast(np.float32).dtype == "float32"
  w = (a < 0).where(a, 0)
  assert w.uop.op == "WHERE" and w.dtype == "int32" and w.uop.src[2].arg == {"value": 0, "dtype": "int32"}
  assert (a < 0).where(1.0, 2.0).dtype == "float32"
  assert (~(a < 0)).uop.op == "NOT" and (~a).uop.op == "XOR"
  assert (~Tensor(np.zeros(2, np.uint8))).uop.src[1].arg["value"] == 255
  check_graph(w)


def test_broadcasting_is_the_spec_broadcast():
  a = Tensor(F)                      # (2, 3, 4)
  b = Tensor(np.ones((3, 1), np.float32))
  t = a * b
  assert t.shape == (2, 3, 4) and t.uop.src == (a.uop, b.uop)
  with pytest.raises(GraphError, match=r"shape\.broadcast"): a + Tensor(np.ones(3, np.float32))


def test_dtype_rules():
  a, f = Tensor(I), Tensor(F)
  with pytest.raises(GraphError, match=r"dtype\.match"): a + f
  with pytest.raises(GraphError, match=r"dtype\.allowed"): a / a        # DIV takes floats
  with pytest.raises(GraphError, match=r"dtype\.allowed"): f // f       # IDIV takes integers
  with pytest.raises(TypeError): a + 0.5                              # not an integer: cast first
  with pytest.raises(GraphError, match=r"CONST\.value"): Tensor(np.zeros(2, np.int8)) + 300
  assert (a + 2.0).uop.src[1].arg == {"value": 2, "dtype": "int32"}
  with pytest.raises(TypeError): bool(a == a)


def test_minimum_and_min_reduce_use_an_order_reversing_inverse():
  for data in (I, F, np.array([0, 255, 7], np.uint8), np.array([True, False])):
    t = Tensor(data)
    m = t.minimum(t)
    assert m.uop.op in ("NEG", "XOR", "NOT") and m.dtype == t.dtype
    check_graph(m)
  assert Tensor(F).min(1).shape == (2, 4)


# ------------------------------------------------------------------ reduce
@pytest.mark.parametrize("method,op", [("sum", "ADD"), ("max", "MAX"), ("prod", "MUL")])
def test_reduce_then_reshape(method, op):
  t = Tensor(F)
  r = getattr(t, method)(1)
  assert r.uop.op == "RESHAPE" and r.uop.src[0].op == "REDUCE" and r.uop.src[0].arg == {"op": op, "axes": (1,)}
  assert r.uop.src[0]._props.shape == (2, 1, 4) and r.shape == (2, 4)
  k = getattr(t, method)((0, -1), keepdim=True)
  assert k.uop.op == "REDUCE" and k.shape == (1, 3, 1)
  assert getattr(t, method)().shape == () and getattr(t, method)(-1).shape == (2, 3)
  check_graph(r); check_graph(k)


# ------------------------------------------------------------------ markers, devices, assign
def test_markers_copy_replicated():
  t = Tensor(F)
  assert t.contiguous().uop.op == "CONTIGUOUS" and t.detach().uop.op == "DETACH"
  c = t.copy("GPU")
  assert c.uop.op == "COPY" and c.device == "GPU" and c.shape == t.shape
  D = ("A", "B")
  s = t.reshape(2, 12).copy(D)
  assert s.device == D and s.axis == 0
  r = s.replicated(0)
  assert r.uop.op == "RESHAPE" and r.uop.src[0].op == "REPLICATED" and r.shape == (12,) and r.axis is None
  check_graph(r)


def test_assign_is_store_then_after():
  b = Tensor.empty(2, 3)
  before = b.uop
  out = b.assign(Tensor(np.ones((2, 3), np.float32)))
  assert out is b and b.uop.op == "AFTER" and b.uop.src[0] is before and b.uop.src[1].op == "STORE"
  assert b.shape == (2, 3)
  c = Tensor.empty(2, 3).assign(5.0)   # a scalar is broadcast to the buffer's shape
  assert c.uop.src[1].src[1].op == "EXPAND"
  check_graph(b); check_graph(c)
  with pytest.raises(GraphError, match=r"STORE\.target"): (Tensor(F) + 1).assign(Tensor(F))


def test_hash_consing_shares_nodes():
  t = Tensor(F)
  assert (t + 1).uop is (t + 1).uop and t.reshape(24).uop is t.reshape(-1).uop


def test_long_chain_is_built_iteratively():
  t = Tensor(np.zeros(3, np.float32))
  for _ in range(20000): t = t + 1.0
  assert t.shape == (3,) and len(t.graph().nodes) == 20000 + 3


# ------------------------------------------------------------------ realizing and backends
class Recorder:
  """A backend that returns fixed outputs and records what it was given."""
  def __init__(self, *outs): self.outs, self.calls = outs, []
  def run(self, graph, inputs):
    self.calls.append((graph, inputs))
    return {f"out{k}": o for k, o in enumerate(self.outs)}


def test_realize_passes_graph_and_bound_inputs_to_the_backend():
  a = Tensor(F)
  t = (a + 1).sum(0)
  be = Recorder(np.ones((3, 4), np.float32))
  assert t.realize(backend=be) is t
  (graph, inputs), = be.calls
  assert [n.op for n in graph.nodes][-1] == "RESHAPE" and validate(graph).ok
  assert list(inputs) == ["buf0"] and np.array_equal(inputs["buf0"], F)
  # the realized tensor is now a BUFFER bound to the result; no second run
  assert t.uop.op == "BUFFER" and t.shape == (3, 4) and t.device == "CPU"
  np.testing.assert_array_equal(t.numpy(backend=be), np.ones((3, 4)))
  assert len(be.calls) == 1 and (t * 2).uop.src[0] is t.uop


def test_graphs_number_their_buffers_from_0_and_inputs_follow(tmp_path):
  """Buffer slots inside the UOps are process-wide unique numbers; a graph (saved, or
  passed to a backend) numbers its buffers 0, 1, ... in graph order, inputs keyed alike."""
  from tinyspec.refimpl import evaluate
  a, b = Tensor(F), Tensor(F + 1)
  for t, first in (((a * b) + a, F), ((b * a) + a, F + 1)):
    g = t.graph()
    bufs = [n for n in g.nodes if n.op == "BUFFER"]
    assert [n.arg["slot"] for n in bufs] == [0, 1] and all(n.tag is None for n in bufs)
    inputs = t.inputs()
    assert sorted(inputs) == ["buf0", "buf1"] and np.array_equal(inputs["buf0"], first)
    np.testing.assert_array_equal(evaluate(g, inputs)["out0"], F * (F + 1) + F)
    be = Recorder(np.zeros((2, 3, 4), np.float32))
    t.realize(backend=be)
    assert sorted(be.calls[0][1]) == ["buf0", "buf1"] and np.array_equal(be.calls[0][1]["buf0"], first)
  (a * b).graph().save(tmp_path / "t.json")
  assert '"slot": 0' in (tmp_path / "t.json").read_text() and '"tag"' not in (tmp_path / "t.json").read_text()


def test_a_loaded_buffer_is_never_a_front_end_buffer(tmp_path):
  """A file's BUFFER equal in slot, dtype, device and shape to a front-end one is another
  UOp (a front-end buffer's identity is a tag files cannot hold) and has no data bound."""
  from tinyspec.graph import Graph
  from tinyspec.uop import UOp
  a = Tensor(F)
  same = Graph.from_uops(UOp("BUFFER", a.uop.src, dict(a.uop.arg)))   # a's very slot, dtype, device and shape
  same.save(tmp_path / "same.json")
  loaded = Graph.load(tmp_path / "same.json").root_uops()[0]
  assert loaded.arg == a.uop.arg and loaded is not a.uop
  assert not Tensor(loaded).numpy().any()                    # zeros: unbound, not a's data
  a.graph().save(tmp_path / "a.json")                        # saved as slot 0, reloaded: still not a
  back = Tensor(Graph.load(tmp_path / "a.json").root_uops()[0])
  assert back.uop is not a.uop and back.uop.arg["slot"] == 0
  mixed = back + a                                           # the loaded buffer keeps slot 0; a takes the next free one
  g, inputs = mixed.graph(), mixed.inputs()
  assert [n.arg["slot"] for n in g.nodes if n.op == "BUFFER"] == [0, 1]
  assert not inputs["buf0"].any() and np.array_equal(inputs["buf1"], F)
  np.testing.assert_array_equal(mixed.numpy(), F)
  with pytest.raises(TypeError, match="Tensor.graph"): Graph.from_uops(a.uop).dumps()   # raw front-end UOps are not a file


def test_realize_keeps_graphs_a_buffer_cannot_hold():
  D = ("A", "B")
  b = Tensor(np.zeros(4, np.float32)).reshape(1, 4).expand(2, 4).copy(D).replicated(0)   # axis None on D
  before = b.uop
  be = Recorder(np.arange(4, dtype=np.float32))
  np.testing.assert_array_equal(b.numpy(backend=be), np.arange(4))
  assert b.uop is before and len(be.calls) == 1
  b.numpy(backend=be)
  assert len(be.calls) == 1   # cached


def test_realize_many_in_one_graph():
  from tinyspec.tensor import realize
  a = Tensor(F)
  x, y = a + 1, (a + 1) * 2
  be = Recorder(np.zeros(F.shape, np.float32), np.ones(F.shape, np.float32))
  vx, vy = realize(x, y, backend=be)
  (graph, _), = be.calls
  assert graph.roots is not None and len(graph.roots) == 2 and [graph.nodes[r].op for r in graph.roots] == ["ADD", "MUL"]
  assert vy.sum() == F.size and x.uop.op == y.uop.op == "BUFFER"


def test_backend_registry():
  from tinyspec.frontend.backends import register_backend, get_backend, backend_names
  assert "ref" in backend_names()
  be = Recorder(np.float32(3))
  register_backend("test-recorder", be)
  assert get_backend("test-recorder") is be
  assert Tensor(F).sum().item(backend="test-recorder") == 3.0
  with pytest.raises(KeyError, match="unknown backend"): get_backend("no-such-backend")
  with pytest.raises(TypeError): register_backend("bad", object())
  with pytest.raises(TypeError): Tensor(F).realize(backend=42)


# ------------------------------------------------------------------ values through the reference evaluator
X32 = np.array([[-7, -1, 0, 3], [5, 8, -128, 100]], np.int32)
Y32 = np.array([[2, 3, 1, -4], [5, -3, 7, 1]], np.int32)
XF = np.array([[-2.5, -1.0, 0.0, 0.75], [1.5, 3.0, 8.0, 100.0]], np.float32)
YF = np.array([[2.0, 0.5, 1.0, -4.0], [1.5, -3.0, 0.25, 1.0]], np.float32)


@pytest.mark.parametrize("name,build,ref", [
  ("add", lambda a, b: a + b, lambda a, b: a + b),
  ("sub", lambda a, b: a - b, lambda a, b: a - b),
  ("mul", lambda a, b: a * b, lambda a, b: a * b),
  ("max", lambda a, b: a.maximum(b), np.maximum),
  ("min", lambda a, b: a.minimum(b), np.minimum),
  ("lt", lambda a, b: a < b, np.less), ("le", lambda a, b: a <= b, np.less_equal),
  ("gt", lambda a, b: a > b, np.greater), ("ge", lambda a, b: a >= b, np.greater_equal),
  ("eq", lambda a, b: a == b, np.equal), ("ne", lambda a, b: a != b, np.not_equal),
  ("where", lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b)),
  ("scalar", lambda a, b: 3 - a * 2, lambda a, b: 3 - a * 2),
  ("neg", lambda a, b: -a, lambda a, b: -a),
  ("broadcast", lambda a, b: a * b[:, :1], lambda a, b: a * b[:, :1]),
])
@pytest.mark.parametrize("dt", ["int32", "float32"])
def test_elementwise_values(name, build, ref, dt):
  x, y = (X32, Y32) if dt == "int32" else (XF, YF)
  t = build(Tensor(x), Tensor(y))
  np.testing.assert_array_equal(value(t), ref(x, y))


def test_integer_only_values():
  a, b = Tensor(X32), Tensor(Y32)
  np.testing.assert_array_equal(value(a // b), X32 // Y32)    # floor division (decision idiv-mod)
  np.testing.assert_array_equal(value(a % b), X32 % Y32)      # sign of the divisor
  np.testing.assert_array_equal(value(a & b), X32 & Y32)
  np.testing.assert_array_equal(value(a | b), X32 | Y32)
  np.testing.assert_array_equal(value(a ^ b), X32 ^ Y32)
  np.testing.assert_array_equal(value(~a), ~X32)
  np.testing.assert_array_equal(value(a << 2), X32 << 2)
  np.testing.assert_array_equal(value(a >> 1), X32 >> 1)


def test_float_only_values():
  a, b = Tensor(XF), Tensor(YF)
  np.testing.assert_array_equal(value(a / b), XF / YF)
  np.testing.assert_array_equal(value(b.recip()), np.float32(1) / YF)
  np.testing.assert_array_equal(value(a.trunc()), np.trunc(XF))
  pos = Tensor(np.abs(XF) + 1)
  np.testing.assert_allclose(value(pos.sqrt()), np.sqrt(np.abs(XF) + 1), rtol=1e-6)
  np.testing.assert_allclose(value(pos.log2()), np.log2(np.abs(XF) + 1), rtol=1e-6)
  np.testing.assert_allclose(value(b.exp2()), np.exp2(YF), rtol=1e-6)
  np.testing.assert_allclose(value(a.sin()), np.sin(XF), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(value(pos ** b), (np.abs(XF) + 1) ** YF, rtol=1e-5)
  np.testing.assert_array_equal(value(a.cast("int32")), XF.astype(np.int32))
  np.testing.assert_array_equal(value(a.bitcast("uint32")), XF.view(np.uint32))


@pytest.mark.parametrize("dt", [np.int32, np.float32])
@pytest.mark.parametrize("axis,keepdim", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, False)])
def test_reduce_values(dt, axis, keepdim):
  x = (np.arange(24).reshape(2, 3, 4) % 5 - 2).astype(dt)
  t = Tensor(x)
  np.testing.assert_array_equal(value(t.sum(axis, keepdim)), x.sum(axis, keepdims=keepdim, dtype=dt))
  np.testing.assert_array_equal(value(t.max(axis, keepdim)), x.max(axis, keepdims=keepdim))
  np.testing.assert_array_equal(value(t.min(axis, keepdim)), x.min(axis, keepdims=keepdim))
  np.testing.assert_array_equal(value(t.prod(axis, keepdim)), x.prod(axis, keepdims=keepdim, dtype=dt))


def test_constructor_values():
  np.testing.assert_array_equal(value(Tensor.full((2, 3), 7)), np.full((2, 3), 7, np.int32))
  np.testing.assert_array_equal(value(Tensor.zeros(3) + 1), np.ones(3, np.float32))
  np.testing.assert_array_equal(value(Tensor.empty(2, dtype="int8") + 1), np.ones(2, np.int8))
  assert value(Tensor(2.5) * 2) == np.float32(5.0)


def test_index_tensor_values():
  idx = np.array([2, 0, 2], np.int32)
  np.testing.assert_array_equal(value(Tensor(F)[:, Tensor(idx)]), F[:, idx])
  np.testing.assert_array_equal(value(Tensor(F)[Tensor(np.int32(1))]), F[1])


def test_markers_copy_assign_values():
  t = Tensor(F)
  np.testing.assert_array_equal(value(t.contiguous().detach() + 0), F)
  np.testing.assert_array_equal(value(t.copy("GPU")), F)
  b = Tensor(np.zeros((2, 3), np.float32))
  b.assign(Tensor(np.ones((2, 3), np.float32)) * 4)
  np.testing.assert_array_equal(value(b + 1), np.full((2, 3), 5, np.float32))


def test_convenience_methods():
  x = np.array([-1.5, 0.5, 2.0], np.float32)
  t = Tensor(x)
  for build, want in [(t.exp(), np.exp(x)), (t.abs().log(), np.log(np.abs(x))), (t.relu(), np.maximum(x, 0)),
                      (t.abs(), np.abs(x)), (t.mulacc(t, 1.0), x * x + 1), (t.contiguous_backward(), x),
                      (t.to("GPU"), x), (Tensor.ones(3) - t, 1 - x)]:
    check_graph(build)
    np.testing.assert_allclose(value(build), want, rtol=2e-6)
  assert t.exp().uop.op == "EXP2" and t.mulacc(t, t).uop.op == "MULACC" and t.to("GPU").uop.op == "COPY"
  assert t.sum().item() == np.float32(1.0) and t.tolist() == x.tolist() and len(t) == 3 and t.ndim == 1
