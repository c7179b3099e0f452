"""Seed 001's compositions (gemm, prefix_sum, arange, gather, scatter_add) and
multi-device collectives, against their NumPy equivalents and the seed's comments."""
import numpy as np
import pytest
from tinyspec.tensor import Tensor, compositions as C, collectives as X
from tinyspec.validate import validate

DTYPES = [np.int32, np.float32]
SIZES = [1, 2, 7]


def value(t: Tensor) -> np.ndarray:
  """t evaluated by the reference evaluator (the default backend)."""
  return t.numpy()


def data(shape, dt, seed=0, lo=-5, hi=6):
  return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(dt)


def assert_valid(t: Tensor):
  res = validate(t.graph())
  assert res.ok, [d.format() for d in res.diagnostics]


# ------------------------------------------------------------------ compositions
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (2, 3, 4), (5, 1, 3), (4, 7, 2)])
def test_gemm(dt, M, K, N):
  a, b = data((M, K), dt, 1), data((K, N), dt, 2)
  c = C.gemm(Tensor(a), Tensor(b))
  assert c.shape == (M, N) and c.dtype == np.dtype(dt).name
  assert [c.uop.op, c.uop.src[0].op, c.uop.src[0].src[0].op] == ["RESHAPE", "REDUCE", "MUL"]
  assert c.uop.src[0].src[0].props.shape == (M, K, N)   # the broadcast product the seed sums
  assert_valid(c)
  np.testing.assert_array_equal(value(c), a @ b)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", SIZES + [16])
def test_prefix_sum(dt, n):
  t = data(n, dt, 3)
  p = C.prefix_sum(Tensor(t))
  assert p.shape == (n,) and p.dtype == np.dtype(dt).name
  ops = {x.op for x in p.graph().nodes}
  assert {"PAD", "EXPAND", "SHRINK", "REDUCE"} <= ops and "INDEX" not in ops
  assert_valid(p)
  np.testing.assert_array_equal(value(p), np.cumsum(t).astype(dt))


@pytest.mark.parametrize("n", SIZES + [33])
def test_arange(n):
  r = C.arange(n)
  assert r.shape == (n,) and r.dtype == "int32" and r.device is None and r.uop.op == "SUB"
  assert Tensor.arange(n).uop is r.uop   # hash-consing: the same graph
  assert_valid(r)
  np.testing.assert_array_equal(value(r), np.arange(n, dtype=np.int32))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("K,D", [(1, 1), (1, 3), (5, 1), (6, 9)])
def test_gather(dt, K, D):
  T = data(K, dt, 4)
  idx = np.random.default_rng(5).integers(0, K, D).astype(np.int32)
  g = C.gather(Tensor(T), Tensor(idx))
  assert g.shape == (D,) and g.dtype == np.dtype(dt).name
  assert_valid(g)
  np.testing.assert_array_equal(value(g), np.take(T, idx))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("K,D", [(1, 1), (1, 4), (5, 1), (6, 9)])
def test_scatter_add(dt, K, D):
  T, val = data(K, dt, 6), data(D, dt, 7)
  idx = np.random.default_rng(8).integers(0, K, D).astype(np.int32)
  s = C.scatter_add(Tensor(T), Tensor(idx), Tensor(val))
  assert s.shape == (K,) and s.dtype == np.dtype(dt).name
  assert_valid(s)
  want = T.copy(); np.add.at(want, idx, val)
  np.testing.assert_array_equal(value(s), want)


def test_index_dtype_must_match_arange():
  with pytest.raises(ValueError, match=r"dtype\.match"):
    C.gather(Tensor(np.zeros(3, np.float32)), Tensor(np.zeros(2, np.int64)))


# ------------------------------------------------------------------ collectives
DEVS = [("GPU:0", "GPU:1"), ("D0", "D1", "D2", "D3")]


@pytest.mark.parametrize("D", DEVS)
@pytest.mark.parametrize("dt", DTYPES)
def test_single_device_collectives(D, dt):
  _n, s = len(D), 2 * len(D)
  T = data(s, dt, 9)
  b = X.broadcast(Tensor(T), D)                 # (s,) on D, axis=None
  assert (b.shape, b.device, b.axis) == ((s,), D, None)
  sc = X.scatter(Tensor(T), D)                  # (s,) on D, axis=0
  assert (sc.shape, sc.device, sc.axis) == ((s,), D, 0) and sc.uop.op == "COPY"
  for t in (b, sc): assert_valid(t)
  np.testing.assert_array_equal(value(b), T)
  np.testing.assert_array_equal(value(sc), T)


@pytest.mark.parametrize("D", DEVS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("s", [4, 8])
def test_sharded_collectives(D, dt, s):
  n = len(D)
  T = data(n * s, dt, 10)
  shards = T.reshape(n, s)
  t = Tensor(T, device=D)                       # (n*s,) on D with axis=0
  assert (t.device, t.axis) == (D, 0)
  expect = {
    "gather": ((n * s,), D[0], None, T),
    "reduce": ((s,), D[0], None, shards.sum(0).astype(dt)),
    "allgather": ((n * s,), D, None, T),
    "reduce_scatter": ((s,), D, 0, shards.sum(0).astype(dt)),
    "allreduce": ((s,), D, None, shards.sum(0).astype(dt)),
  }
  for name, (shape, dev, axis, want) in expect.items():
    r = getattr(X, name)(t, D)
    assert (r.shape, r.device, r.axis) == (shape, dev, axis), name
    assert_valid(r)
    np.testing.assert_array_equal(value(r), want, err_msg=name)


def test_reduce_scatter_needs_divisible_shards():
  D = ("A", "B", "C", "D")
  with pytest.raises(ValueError): X.reduce_scatter(Tensor(np.zeros(4 * 6, np.float32), device=D), D)


def test_compositions_agree_on_the_c_backend():
  """The front end's backend registry reaches the compiler's C target; it must agree with the reference."""
  a, b = data((3, 4), np.float32, 11), data((4, 2), np.float32, 12)
  idx = np.array([2, 0, 2], np.int32)
  for t in (C.gemm(Tensor(a), Tensor(b)), C.prefix_sum(Tensor(a.reshape(-1))), C.arange(6),
            C.gather(Tensor(a[0]), Tensor(idx)), C.scatter_add(Tensor(a[0]), Tensor(idx), Tensor(a[1, :3]))):
    np.testing.assert_array_equal(Tensor(t.uop).numpy(backend="c"), Tensor(t.uop).numpy(backend="ref"))
