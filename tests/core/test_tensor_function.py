"""The @function decorator: tracing to FUNCTION(TUPLE(body), args...) with PARAMs, as
seed 001 describes it."""
import numpy as np
import pytest
from tinyspec.tensor import Tensor, function
from tinyspec.frontend.walk import toposort
from tinyspec.validate import validate
from tinyspec.cli import main as cli


def value(t: Tensor) -> np.ndarray:
  """t evaluated by the reference evaluator (the default backend)."""
  return t.numpy()


def ops_below(u, op):
  return [x for x in toposort([u]) if x.op == op]


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 2.0, np.float32)


@function
def add(a, b): return a + b


def test_single_return_is_gettuple_of_function_of_tuple():
  x, y = Tensor(A), Tensor(B)
  out = add(x, y)
  g = out.uop
  assert g.op == "GETTUPLE" and g.arg == 0
  f = g.src[0]
  assert f.op == "FUNCTION" and f.src[1:] == (x.uop, y.uop)
  body = f.src[0]
  assert body.op == "TUPLE" and len(body.src) == 1 and body.src[0].op == "ADD"
  p0, p1 = body.src[0].src
  assert (p0.op, p0.arg) == ("PARAM", {"slot": 0, "dtype": "float32"}) and p1.arg["slot"] == 1
  assert p0.props.shape == (2, 3)
  # the body holds PARAMs only, no concrete buffers
  assert not ops_below(body, "BUFFER")
  assert out.shape == (2, 3) and out.dtype == "float32" and out.device == "CPU"
  assert validate(out.graph()).ok
  np.testing.assert_array_equal(value(out), A + B)


def test_same_shapes_reuse_the_body():
  f1 = add(Tensor(A), Tensor(B)).uop.src[0]
  f2 = add(Tensor(B), Tensor(A)).uop.src[0]
  assert f1 is not f2 and f1.src[0] is f2.src[0]   # same body, other arguments
  f3 = add(Tensor(A.reshape(3, 2)), Tensor(B.reshape(3, 2))).uop.src[0]
  assert f3.src[0] is not f1.src[0]


def test_tuple_and_list_returns():
  @function
  def two(a, b): return a * b, a - b

  @function
  def as_list(a): return [a + 1, a]

  x, y = Tensor(A), Tensor(B)
  p, m = two(x, y)
  assert (p.uop.arg, m.uop.arg) == (0, 1) and p.uop.src[0] is m.uop.src[0]
  assert len(p.uop.src[0].src[0].src) == 2
  lst = as_list(x)
  assert isinstance(lst, list) and len(lst) == 2
  assert lst[1].uop.src[0].src[0].src[1].op == "PARAM"   # returning an input returns its PARAM
  np.testing.assert_array_equal(value(p), A * B)
  np.testing.assert_array_equal(value(m), A - B)
  np.testing.assert_array_equal(value(lst[0]), A + 1)


def test_inputs_found_in_nested_arguments_and_deduplicated():
  @function
  def f(pair, d, scale=None):
    a, b = pair
    return a * b + d["c"] * scale

  x, y = Tensor(A), Tensor(B)
  out = f((x, y), {"c": x}, scale=y)
  fn = out.uop.src[0]
  assert fn.src[1:] == (x.uop, y.uop)          # x and y once each, first appearance first
  slots = sorted(p.arg["slot"] for p in ops_below(fn.src[0], "PARAM"))
  assert slots == [0, 1]
  np.testing.assert_array_equal(value(out), A * B + A * B)


def test_same_tensor_twice_is_one_param():
  x = Tensor(A)
  out = add(x, x)
  fn = out.uop.src[0]
  assert fn.src[1:] == (x.uop,) and fn.src[0].src[0].src == (fn.src[0].src[0].src[0],) * 2
  np.testing.assert_array_equal(value(out), A + A)


def test_inputs_that_are_expressions_become_params_whole():
  x = Tensor(A)
  e = x * 3
  out = add(e, x)
  fn = out.uop.src[0]
  assert fn.src[1:] == (e.uop, x.uop)
  assert not ops_below(fn.src[0], "MUL")   # e's graph stays outside the body
  np.testing.assert_array_equal(value(out), A * 3 + A)


def test_nested_functions():
  @function
  def inner(a): return a * a

  @function
  def outer(a, b): return inner(a) + b

  x, y = Tensor(A), Tensor(B)
  out = outer(x, y)
  fo = out.uop.src[0]
  assert fo.op == "FUNCTION" and fo.src[1:] == (x.uop, y.uop)
  fi = [u for u in ops_below(fo.src[0], "FUNCTION")]
  assert len(fi) == 1
  # the inner call's argument is now the outer PARAM 0; the inner body keeps its own PARAM 0
  assert fi[0].src[1].op == "PARAM" and fi[0].src[1].arg["slot"] == 0
  assert fi[0].src[0] is inner(x).uop.src[0].src[0]
  assert validate(out.graph()).ok
  np.testing.assert_array_equal(value(out), A * A + B)


def test_calling_with_different_tensors_and_scalars():
  @function
  def affine(a, k): return a * k + 1

  r1 = affine(Tensor(A), 2.0)        # a Python scalar is traced in as a constant
  r2 = affine(Tensor(B), 2.0)
  assert r1.uop.src[0].src[0] is r2.uop.src[0].src[0] and len(r1.uop.src[0].src) == 2
  assert r1.uop.src[0].src[1] is not r2.uop.src[0].src[1]
  np.testing.assert_array_equal(value(r1), A * 2 + 1)
  np.testing.assert_array_equal(value(r2), B * 2 + 1)


def test_bad_returns_are_refused():
  @function
  def nothing(a): return None
  with pytest.raises(TypeError, match="must return a Tensor"): nothing(Tensor(A))


def test_saved_function_graph_validates_on_the_command_line(tmp_path, capsys):
  @function
  def f(a, b): return (a * b).sum(1), a.max()

  s, m = f(Tensor(A), Tensor(B))
  path = tmp_path / "f.json"
  from tinyspec.tensor import export
  export(s, m)[0].save(path)
  assert cli(["validate", str(path)]) == 0
  assert "valid" in capsys.readouterr().out
  s.graph().save(tmp_path / "s.json")
  assert cli(["validate", "-q", str(tmp_path / "s.json")]) == 0


def test_function_over_a_sharded_tensor():
  from tinyspec.tensor import collectives as X
  D = ("A", "B")

  @function
  def allreduce(t): return X.allreduce(t, D)

  T = np.arange(8, dtype=np.float32)
  r = allreduce(Tensor(T, device=D))
  body = r.uop.src[0].src[0]
  assert not ops_below(body, "BUFFER") and ops_below(body, "COPY")
  assert r.shape == (4,) and r.device == D
  np.testing.assert_array_equal(value(r), T.reshape(2, 4).sum(0))


# ------------------------------------------------------------------ the shard axis through FUNCTION
D2 = ("CPU:0", "CPU:1")


def test_reduce_scatter_inside_a_function_keeps_axis_0():
  """The body's COPY to D shards the result: the tuple, the FUNCTION and GETTUPLE carry it."""
  from tinyspec.tensor import collectives as X
  Tn = Tensor(np.arange(8, dtype=np.int32)).copy(D2)
  plain = X.reduce_scatter(Tn, D2)
  r = function(lambda t: X.reduce_scatter(t, D2))(Tn)
  f = r.uop.src[0]
  assert (plain.axis, r.axis) == (0, 0) and (r.shape, r.device) == ((4,), D2)
  assert f.src[0].props.axis == (0,) and f.props.axis == (0,)
  np.testing.assert_array_equal(value(r), value(plain))


def test_a_sharded_argument_carries_its_axis_through_the_body():
  """The body is traced over device-less PARAMs (axis None); the call substitutes the
  argument's axis: elementwise keeps it, a RESHAPE remaps it, a single-device call has none."""
  Tn = Tensor(np.arange(8, dtype=np.float32)).copy(D2)
  inc = function(lambda t: t + 1)
  grid = function(lambda t: t.reshape(2, 4).permute(1, 0))
  assert inc(Tn).uop.src[0].src[0].props.axis == (None,)    # the body alone
  assert inc(Tn).axis == 0 and grid(Tn).axis == 1
  assert inc(Tensor(np.zeros(8, np.float32))).axis is None
  both = function(lambda t: (t * 2, t.sum(0)))(Tn)
  assert [b.axis for b in both] == [0, None]                 # a reduce over the shard axis drops it
  np.testing.assert_array_equal(value(grid(Tn)), np.arange(8, dtype=np.float32).reshape(2, 4).T)


def test_a_call_that_would_break_an_axis_rule_when_inlined_is_refused():
  from tinyspec.tensor import GraphError
  x = Tensor(np.zeros((2, 2), np.float32)).copy(D2)          # axis 0
  y = x.permute(1, 0)                                         # axis 1
  add2 = function(lambda a, b: a + b)
  with pytest.raises(GraphError, match="axis.match"): add2(x, y)
