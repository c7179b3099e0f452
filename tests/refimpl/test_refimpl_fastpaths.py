"""The evaluator's fast paths give the definition's bits: a float sum or product's last value
folded by rows (loops._fold_rows) is the sequential fold, and a read whose index is affine in
the loop indices (refimpl/affine.py) is the gather, in range or not, wrapping or not. Each
with a planted bug that the check catches."""
from __future__ import annotations
import numpy as np
import pytest
from tinyspec.refimpl import evaluate, loops, affine
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.interpreter import interpret
from tinyspec.refimpl.numeric import canonical_nan

F32 = "float32"


# ------------------------------------------------------------------ the fold by rows
def _draw_fold(rng):
  dt = str(rng.choice(["float32", "float64"]))
  t = np.dtype(dt)
  R = int(rng.integers(1, 4))
  shape = [int(rng.integers(1, 7)) for _ in range(R)]
  dims = sorted(int(d) for d in rng.choice(R, size=int(rng.integers(1, R + 1)), replace=False))
  shape[dims[-1]] = int(rng.integers(1, 40))   # long enough for a pairwise sum to differ
  own = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 2))))

  def values(shp):
    a = (rng.standard_normal(shp) * 10.0 ** rng.integers(-3, 8, shp)).astype(t)
    odd = rng.random(shp) < 0.05
    a[odd] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40], t), odd.sum())
    return a
  xs = []
  for _ in range(int(rng.integers(1, 4))):
    shp = [s if rng.random() < 0.8 else 1 for s in shape]
    for d in dims: shp[d] = shape[d]
    xs.append(values(tuple(shp) + own))
  start = values(tuple(s if (d not in dims and rng.random() < 0.5) else 1 for d, s in enumerate(shape)) + own)
  return str(rng.choice(["ADD", "MUL"])), dt, start, xs, dims


def check_fold_rows(trials=300):
  rng = np.random.default_rng(7)
  folded = 0
  for _ in range(trials):
    op, dt, start, xs, dims = _draw_fold(rng)
    with np.errstate(all="ignore"):
      got = loops._fold_rows(op, start, xs, dims)
      if got is None: continue
      want = loops.accumulate(op, dt, start, xs, dims)[-1]   # the scan, step by step
    folded += 1
    assert canonical_nan(got, dt).tobytes() == canonical_nan(want, dt).tobytes(), f"{op} {dt} over {dims}: not the sequential fold"
  assert folded > trials // 2


def test_the_fold_by_rows_is_the_sequential_fold():
  check_fold_rows()


def test_planted_fold_along_the_fast_axis_is_caught(monkeypatch):
  def pairwise(op, start, xs, dims):   # reduced along the contiguous axis: NumPy sums that pairwise
    k = len(dims)
    seq = loops._in_order(xs, dims, np.broadcast_shapes(*(np.moveaxis(x, dims, tuple(range(k))).shape[k:] for x in xs)))
    if seq.size == seq.shape[-1]: return None
    first = np.moveaxis(start[tuple(slice(0, 1) if d in dims else slice(None) for d in range(start.ndim))], dims, tuple(range(k)))
    first = np.broadcast_to(first.reshape(first.shape[k:]), seq.shape[:-1])
    red = (np.add if op == "ADD" else np.multiply).reduce(seq, axis=-1)
    return first + red if op == "ADD" else first * red
  monkeypatch.setattr(loops, "_fold_rows", pairwise)
  with pytest.raises(AssertionError, match="not the sequential fold"):
    check_fold_rows()


# ------------------------------------------------------------------ affine reads
A, B, N = 6, 8, 64


def strided_read(index):
  """out[g*B + l] = x[index(b, g, l)] over g < A, l < B; x has N elements."""
  b = Builder()
  x = b.param((N,), F32, 0); out = b.param((A * B,), F32, 1)
  g, l = b.range(A, 0, "GLOBAL"), b.range(B, 1, "LOOP")
  c = lambda v: b.const(v, "index")
  dst = b.ADD(b.MUL(g, c(B)), l)
  b.SINK(b.END(b.STORE(b.INDEX(out, dst), b.INDEX(x, index(b, g, l, c))), g, l))
  return b.graph()


INDEXES = {   # name -> (index expression, whether it is read as a view)
  "rows": (lambda b, g, l, c: b.ADD(b.MUL(g, c(B)), l), True),
  "backwards": (lambda b, g, l, c: b.ADD(c(A * B - 1), b.ADD(b.MUL(g, c(-B)), b.MUL(l, c(-1)))), True),
  "shifted": (lambda b, g, l, c: b.ADD(b.ADD(b.SHL(g, c(2)), b.MUL(l, c(3))), c(5)), True),
  "mulacc": (lambda b, g, l, c: b.MULACC(l, c(7), g), True),
  "int32": (lambda b, g, l, c: b.CAST(b.ADD(b.MUL(b.CAST(g, arg="int32"), b.CAST(c(9), arg="int32")), b.CAST(l, arg="int32")), arg="index"), True),
  "past the end": (lambda b, g, l, c: b.ADD(b.ADD(b.MUL(g, c(B)), l), c(20)), True),   # a form, read by the gather (out of range)
  "wraps": (lambda b, g, l, c: b.ADD(b.CAST(b.CAST(b.MUL(g, c(1 << 32)), arg="int32"), arg="index"),
                                     b.ADD(b.MUL(g, c(-(1 << 32))), l)), False),
}


def check_affine_reads():
  x = np.arange(1, N + 1, dtype=np.float32)
  for name, (index, viewed) in INDEXES.items():
    g = strided_read(index)
    want = interpret(g, {"param0": x})["param1"]
    got = evaluate(g, {"param0": x})["param1"]
    assert got.tobytes() == want.tobytes(), f"{name}: {got} is not the definition's {want}"
    from tinyspec.refimpl import prepared
    entry = prepared.prepare(g)
    (plan,) = [p for p in entry.plans.values() if p.kernel]
    read = next(i for i, n in enumerate(g.nodes) if n.op == "INDEX" and g.nodes[n.src[0]].arg.get("slot") == 0)
    assert (read in plan.affine) == viewed, f"{name}: affine form {'missed' if viewed else 'taken'}"


def test_affine_reads_are_the_gather():
  check_affine_reads()


def test_planted_form_that_ignores_wrapping_is_caught(monkeypatch):
  big = type("Unbounded", (), {"__getitem__": lambda self, k: type("D", (), {"max": 1 << 200})()})()
  monkeypatch.setattr(affine, "DTYPES", big)   # every intermediate "fits": a CAST that wraps is taken for exact
  from tinyspec.refimpl import prepared
  prepared.clear()
  with pytest.raises(AssertionError, match="wraps"):
    check_affine_reads()
  prepared.clear()


def test_planted_stride_off_by_one_is_caught(monkeypatch):
  real = affine.Affine.plus
  monkeypatch.setattr(affine.Affine, "plus", lambda self, o: (lambda f: f and affine.Affine(f.coefs, f.const + 1, f.vec))(real(self, o)))
  from tinyspec.refimpl import prepared
  prepared.clear()
  with pytest.raises(AssertionError, match="rows"):
    check_affine_reads()
  prepared.clear()


# ------------------------------------------------------------------ one element written at every point
def last_write_wins(n=7):
  """out[0] = x[i] for every i, and a register acc[1] = x[i] read after the loop: the last iteration's value."""
  b = Builder()
  x = b.param((n,), F32, 0); out = b.param((2,), F32, 1)
  acc = b.buffer((2,), F32, 0, addrspace="REG")
  i = b.range(n, 0, "LOOP")
  c = lambda v: b.const(v, "index")
  e = b.END(b.GROUP(b.STORE(b.INDEX(out, c(0)), b.INDEX(x, i)), b.STORE(b.INDEX(acc, c(1)), b.INDEX(x, i))), i)
  b.SINK(b.STORE(b.INDEX(out, c(1)), b.INDEX(b.AFTER(acc, e), c(1))))
  return b.graph()


def check_one_element_writes():
  x = np.arange(1, 8, dtype=np.float32)
  g = last_write_wins()
  want = interpret(g, {"param0": x})["param1"]
  assert want.tolist() == [7.0, 7.0]
  got = evaluate(g, {"param0": x})["param1"]
  assert got.tobytes() == want.tobytes(), f"one element written at every point: {got}, not the last write {want}"


def test_one_element_written_at_every_point_keeps_the_last_write():
  check_one_element_writes()


def test_planted_first_write_wins_is_caught(monkeypatch):
  from tinyspec.refimpl import storage
  def first(val, R, apart):
    return val[tuple(slice(None) if d in apart or val.shape[d] <= 1 else slice(0, 1) for d in range(R))]
  monkeypatch.setattr(storage, "last_writes", first)
  with pytest.raises(AssertionError, match="not the last write"):
    check_one_element_writes()


# ------------------------------------------------------------------ stores at affine positions
def strided_store(place, size):
  """out[place(b, g, l)] = x[g*B + l] over g < A, l < B (x's values all distinct); out has `size` elements."""
  b = Builder()
  x = b.param((A * B,), F32, 0); out = b.param((size,), F32, 1)
  g, l = b.range(A, 0, "GLOBAL"), b.range(B, 1, "LOOP")
  c = lambda v: b.const(v, "index")
  b.SINK(b.END(b.STORE(b.INDEX(out, place(b, g, l, c)), b.INDEX(x, b.ADD(b.MUL(g, c(B)), l))), g, l))
  return b.graph()


PLACES = {   # name -> (place, out size)
  "rows": (lambda b, g, l, c: b.ADD(b.MUL(g, c(B)), l), A * B),
  "backwards": (lambda b, g, l, c: b.ADD(c(A * B - 1), b.ADD(b.MUL(g, c(-B)), b.MUL(l, c(-1)))), A * B),
  "every other": (lambda b, g, l, c: b.SHL(b.ADD(b.MUL(g, c(B)), l), c(1)), 2 * A * B),
  "columns": (lambda b, g, l, c: b.ADD(g, b.MUL(l, c(A))), A * B),
  "overlapping": (lambda b, g, l, c: b.ADD(g, l), A + B),
  "overlapping backwards": (lambda b, g, l, c: b.ADD(b.MUL(g, c(-1)), b.ADD(b.MUL(l, c(-1)), c(A + B - 2))), A + B),
  "one place": (lambda b, g, l, c: c(3), 5),
  "partly past the end": (lambda b, g, l, c: b.ADD(b.ADD(b.MUL(g, c(B)), l), c(5)), A * B),
}


def check_affine_stores():
  x = np.arange(1, A * B + 1, dtype=np.float32)
  for name, (place, size) in PLACES.items():
    g = strided_store(place, size)
    for before in (None, -np.arange(1, size + 1, dtype=np.float32)):   # zeros, or contents that show where nothing is written
      inputs = {"param0": x} if before is None else {"param0": x, "param1": before}
      want = interpret(g, dict(inputs))["param1"]
      got = evaluate(g, dict(inputs))["param1"]
      assert got.tobytes() == want.tobytes(), f"{name}: {got} is not the definition's {want}"
    from tinyspec.refimpl import prepared
    (plan,) = [p for p in prepared.prepare(g).plans.values() if p.kernel]
    assert plan.affine_targets and plan.lazy, f"{name}: the store's place is not a lazy affine form"


def test_affine_stores_are_the_scatter():
  check_affine_stores()


def test_planted_store_that_ignores_overlaps_is_caught(monkeypatch):
  from tinyspec.refimpl import storage
  real = storage._write_affine
  def no_overlap_check(state, w, R):   # every form written through the view, overlapping or not
    form, sizes = w.path[0][1]
    if w.gate is not None or state.ndim != R + 1: return real(state, w, R)
    flat = state.reshape(-1)
    pos = storage.affine_positions(form, sizes, R)
    if pos.min() < 0 or pos.max() >= flat.size: return real(state, w, R)
    flat[pos.reshape(-1)[::-1]] = np.broadcast_to(w.value, pos.shape).reshape(-1)[::-1]   # the writes in reverse order
    return True
  monkeypatch.setattr(storage, "_write_affine", no_overlap_check)
  with pytest.raises(AssertionError, match="overlapping"):
    check_affine_stores()


def test_planted_store_that_claims_to_cover_everything_is_caught(monkeypatch):
  from tinyspec.refimpl import storage
  monkeypatch.setattr(storage, "covers_all", lambda w, shape: True)   # the contents before never copied ...
  monkeypatch.setattr(storage, "unfilled", lambda shape, dtype: np.full(shape, np.nan, dtype))   # ... and what is not written shows
  with pytest.raises(AssertionError, match="every other|partly past the end|overlapping|one place"):
    check_affine_stores()


def test_a_store_that_covers_everything_is_seen_as_one():
  from tinyspec.refimpl import storage
  seen = []
  real = storage.covers_all
  def spy(w, shape):
    seen.append(real(w, shape))
    return seen[-1]
  storage.covers_all = spy
  try: check_affine_stores()
  finally: storage.covers_all = real
  assert seen.count(True) == 2 * 3 and False in seen   # rows, backwards, columns; with zeros and with contents before


# ------------------------------------------------------------------ a register element at one place
def register_at(place, n=5, threads=3):
  """Per thread g (a SPECIAL: each its own register): acc[place] = 0.5; acc[place] += x[g*n + i]
  over i < n; out[5g] = acc[place]; acc[place] = x[g*n + i] at every i (the last wins);
  out[5g + 1] = acc[place] and out[5g + 2 ..] = acc[0], acc[1], acc[2] (a write at the wrong
  place shows). The places are constant: in range, past the end or negative."""
  b = Builder()
  x = b.param((threads * n,), F32, 0); out = b.param((5 * threads,), F32, 1)
  acc = b.buffer((3,), F32, 0, addrspace="REG")
  c = lambda v: b.const(v, "index")
  g = b.SPECIAL(c(threads), arg={"name": "gidx0"})
  at = lambda k: b.INDEX(out, b.ADD(b.MUL(g, c(5)), c(k)))
  init = b.STORE(b.INDEX(acc, c(place)), b.const(0.5, F32))
  i = b.range(n, 0, "REDUCE")
  a = b.AFTER(acc, init, i)
  summed = b.END(b.STORE(b.INDEX(a, c(place)), b.ADD(b.INDEX(a, c(place)), b.INDEX(x, b.ADD(b.MUL(g, c(n)), i)))), i)
  first = b.STORE(at(0), b.INDEX(b.AFTER(acc, summed), c(place)))
  j = b.range(n, 1, "LOOP")
  last = b.AFTER(acc, b.END(b.STORE(b.INDEX(b.AFTER(acc, first), c(place)), b.INDEX(x, b.ADD(b.MUL(g, c(n)), j))), j))
  b.SINK(b.GROUP(first, b.STORE(at(1), b.INDEX(last, c(place))), *(b.STORE(at(2 + k), b.INDEX(last, c(k))) for k in range(3))))
  return b.graph()


def check_register_places():
  x = (np.arange(1, 16, dtype=np.float32) * np.float32(1.25)) ** 2
  for place in (0, 2, 3, -1):
    g = register_at(place)
    want = interpret(g, {"param0": x})["param1"]
    got = evaluate(g, {"param0": x})["param1"]
    assert got.tobytes() == want.tobytes(), f"place {place}: {got} is not the definition's {want}"


def test_register_element_at_one_place_is_the_scatter():
  check_register_places()


@pytest.mark.parametrize("bug", ["next place", "no range check"])
def test_planted_register_place_bugs_are_caught(monkeypatch, bug):
  from tinyspec.refimpl import storage
  real = storage._one_place
  def planted(state, w, R):
    pos = real(state, w, R)
    if bug == "next place": return None if pos is None else (pos + 1) % state.shape[R]
    kind, data = w.path[0] if len(w.path) == 1 else (None, None)   # out of range wraps around, as NumPy's negative indices would
    if kind == "affine" and not data[0].coefs and data[0].vec is None: return data[0].const % state.shape[R]
    if kind == "index" and data[0].size == 1 and w.gate is None: return int(data[0].reshape(-1)[0]) % state.shape[R]
    return pos
  monkeypatch.setattr(storage, "_one_place", planted)
  with pytest.raises(AssertionError, match="not the definition"):
    check_register_places()


# ------------------------------------------------------------------ data-dependent reads: the range check
def gather_by(n=11, m=6):
  """out[i] = x[k[i]] (a LOAD gated by nothing: out of range reads zero) over i < m."""
  b = Builder()
  x = b.param((n,), F32, 0); k = b.param((m,), "int32", 1); out = b.param((m,), F32, 2)
  i = b.range(m, 0, "GLOBAL")
  b.SINK(b.END(b.STORE(b.INDEX(out, i), b.LOAD(b.INDEX(x, b.LOAD(b.INDEX(k, i))))), i))
  return b.graph()


def check_data_dependent_reads():
  from tinyspec.refimpl import storage
  x = np.arange(1, 12, dtype=np.float32)
  for ks in ([0, 10, 3, 3, 9, 1], [-1, 0, 11, 5, 2 ** 31 - 1, -(2 ** 31)], [10, 10, 10, 10, 10, 11]):
    inputs = {"param0": x, "param1": np.array(ks, np.int32)}
    want = interpret(gather_by(), dict(inputs))["param2"]
    got = evaluate(gather_by(), dict(inputs))["param2"]
    assert got.tobytes() == want.tobytes(), f"indices {ks}: {got} is not the definition's {want}"
  for a, n in [(np.array([], np.int32), 0), (np.array([0], np.int8), 0), (np.array([-128, 127], np.int8), 128),
               (np.array([0, 127], np.int8), 128), (np.array(2 ** 64 - 1, np.uint64), 5), (np.array([[4], [0]]), 5), (np.array(5), 5)]:
    assert storage.out_of_range(a, n) == bool(a.size and not ((a >= 0) & (a < n)).all()), (a, n)


def test_data_dependent_reads_are_the_gather():
  check_data_dependent_reads()


def test_planted_range_check_that_misses_the_top_is_caught(monkeypatch):
  from tinyspec.refimpl import storage
  monkeypatch.setattr(storage, "out_of_range", lambda a, n: a.size > 0 and bool(a.min() < 0))
  with pytest.raises((AssertionError, IndexError)):
    check_data_dependent_reads()
