"""Derived properties, read through `tinyspec props --json` (the user's view) on raw graphs:
the multi-device axis rules of seed 001 (BUFFER on an n-tuple device, RESHAPE, PERMUTE,
REDUCE, REPLICATED, COPY) and its collectives written out as graphs, whose results must
have the shapes, devices and axes the seed states; and a few dtype/shape/min_max rows."""
from __future__ import annotations
import json
import pytest
from tinyspec.cli import main

D = ["GPU:0", "GPU:1"]       # the n-tuple device, n = 2
N, S = 2, 4                  # n devices, s elements


class G:
  """A node list under construction; methods return the new node's index."""
  def __init__(self): self.nodes = []

  def add(self, op, src=(), arg=None) -> int:
    n = {"op": op}
    if src: n["src"] = list(src)
    if arg is not None: n["arg"] = arg
    self.nodes.append(n)
    return len(self.nodes) - 1

  def shape(self, *dims): return self.add("VCONST", arg={"values": list(dims), "dtype": "index"})
  def buffer(self, dims, device, dtype="float32"): return self.add("BUFFER", [self.shape(*dims)], {"slot": 0, "dtype": dtype, "device": device})
  def reshape(self, x, *dims): return self.add("RESHAPE", [x, self.shape(*dims)])
  def expand(self, x, *dims): return self.add("EXPAND", [x, self.shape(*dims)])
  def copy(self, x, device): return self.add("COPY", [x], {"device": device})
  def replicated(self, x, *axes): return self.reshape(self.add("REPLICATED", [x], list(axes)), *self._drop(x, axes))
  def sum(self, x, *axes): return self.reshape(self.add("REDUCE", [x], {"op": "ADD", "axes": list(axes)}), *self._drop(x, axes))
  def permute(self, x, *order): return self.add("PERMUTE", [x], list(order))

  def _drop(self, x, axes):
    """The Tensor methods .sum(axis) / .replicated(axis) drop the collapsed axes (decision
    replicated-shape); the ops keep them as size 1, so a RESHAPE follows."""
    shape = self._shape_of(x)
    return [d for k, d in enumerate(shape) if k not in axes]

  def _shape_of(self, x):
    n = self.nodes[x]
    if n["op"] == "BUFFER": return self.nodes[n["src"][0]]["arg"]["values"]
    if n["op"] in ("RESHAPE", "EXPAND"): return self.nodes[n["src"][1]]["arg"]["values"]
    if n["op"] == "PERMUTE": return [self._shape_of(n["src"][0])[k] for k in n["arg"]]
    return self._shape_of(n["src"][0])    # COPY and the rest keep the shape


def props(capsys, tmp_path, g: G) -> list[dict]:
  f = tmp_path / "g.json"
  f.write_text(json.dumps(g.nodes))
  rc = main(["props", "--json", str(f)])
  rep = json.loads(capsys.readouterr().out)
  assert rc == 0, rep["errors"]
  return rep["nodes"]


def final(capsys, tmp_path, g: G) -> tuple:
  p = props(capsys, tmp_path, g)[-1]
  return tuple(p["shape"]), p["device"], p["axis"]


# ------------------------------------------------------------------ the axis rules one by one
def test_buffer_on_an_n_tuple_device_has_axis_0(capsys, tmp_path):
  g = G(); g.buffer([4, 3], D)
  p = props(capsys, tmp_path, g)[-1]
  assert (p["shape"], p["device"], p["axis"]) == ([4, 3], D, 0)
  g = G(); g.buffer([4, 3], "GPU:0")
  assert props(capsys, tmp_path, g)[-1]["axis"] is None


@pytest.mark.parametrize("new,axis", [((4, 2, 3), 0), ((1, 4, 6), 1), ((1, 1, 24), 2), ((2, 12), 0), ((24,), 0)])
def test_reshape_remaps_the_axis_to_the_same_boundary(capsys, tmp_path, new, axis):
  g = G(); g.reshape(g.buffer([4, 6], D), *new)
  assert final(capsys, tmp_path, g) == (new, D, axis)


def test_permute_follows_the_axis(capsys, tmp_path):
  g = G(); b = g.buffer([4, 3, 2], D); p1 = g.permute(b, 2, 0, 1); g.permute(p1, 1, 2, 0)
  nodes = props(capsys, tmp_path, g)
  assert [n["axis"] for n in nodes if n["op"] == "PERMUTE"] == [1, 0]
  assert nodes[-1]["shape"] == [4, 3, 2]


def test_reduce_on_the_shard_axis_gives_null(capsys, tmp_path):
  g = G(); b = g.buffer([4, 3], D)
  on = g.add("REDUCE", [b], {"op": "ADD", "axes": [0]}); off = g.add("REDUCE", [b], {"op": "MAX", "axes": [1]})
  nodes = props(capsys, tmp_path, g)
  assert (nodes[on]["shape"], nodes[on]["axis"]) == ([1, 3], None)
  assert (nodes[off]["shape"], nodes[off]["axis"]) == ([4, 1], 0)


def test_replicated_on_the_shard_axis_gives_null(capsys, tmp_path):
  g = G(); b = g.buffer([4, 3], D)
  on = g.add("REPLICATED", [b], [0]); off = g.add("REPLICATED", [b], [1])
  nodes = props(capsys, tmp_path, g)
  assert (nodes[on]["shape"], nodes[on]["axis"], nodes[on]["device"]) == ([1, 3], None, D)
  assert (nodes[off]["shape"], nodes[off]["axis"]) == ([4, 1], 0)


def test_copy_gives_null_to_one_device_and_0_to_an_n_tuple(capsys, tmp_path):
  g = G(); b = g.buffer([4, 3], D); one = g.copy(b, "CPU"); many = g.copy(g.buffer([4, 3], "CPU"), D)
  nodes = props(capsys, tmp_path, g)
  assert (nodes[one]["device"], nodes[one]["axis"], nodes[one]["shape"]) == ("CPU", None, [4, 3])
  assert (nodes[many]["device"], nodes[many]["axis"], nodes[many]["shape"]) == (D, 0, [4, 3])


def test_elementwise_ops_inherit_the_axis(capsys, tmp_path):
  g = G(); b = g.buffer([4, 3], D); c = g.add("CONST", arg={"value": 2.0, "dtype": "float32"}); m = g.add("MUL", [b, c])
  g.add("WHERE", [g.add("CMPLT", [m, b]), m, b])
  assert [n["axis"] for n in props(capsys, tmp_path, g)[-3:]] == [0, 0, 0]


# ------------------------------------------------------------------ the collectives of seed 001
def broadcast(g, t): return g.replicated(g.copy(g.expand(g.reshape(t, 1, S), N, S), D), 0)
def scatter(g, t): return g.copy(t, D)
def gather(g, t): return g.copy(t, D[0])
def reduce(g, t): return g.sum(g.reshape(gather(g, t), N, S), 0)
def allgather(g, t, n_s): return g.replicated(g.copy(g.expand(g.reshape(t, 1, n_s), N, n_s), D), 0)
def reduce_scatter(g, t): return g.reshape(g.sum(g.copy(g.permute(g.reshape(t, N, N, S // N), 1, 0, 2), D), 1), S)
def allreduce(g, t): return allgather(g, reduce_scatter(g, t), S)


def test_broadcast(capsys, tmp_path):
  g = G(); broadcast(g, g.buffer([S], "GPU:0"))
  assert final(capsys, tmp_path, g) == ((S,), D, None)        # (s,) on D, axis=null


def test_scatter(capsys, tmp_path):
  g = G(); scatter(g, g.buffer([S], "GPU:0"))
  assert final(capsys, tmp_path, g) == ((S,), D, 0)           # (s,) on D, axis=0


def test_gather(capsys, tmp_path):
  g = G(); gather(g, g.buffer([N * S], D))
  assert final(capsys, tmp_path, g) == ((N * S,), D[0], None)  # (n*s,) on D[0], axis=null


def test_reduce(capsys, tmp_path):
  g = G(); reduce(g, g.buffer([N * S], D))
  assert final(capsys, tmp_path, g) == ((S,), D[0], None)      # (s,) on D[0], axis=null


def test_allgather(capsys, tmp_path):
  g = G(); allgather(g, g.buffer([N * S], D), N * S)
  assert final(capsys, tmp_path, g) == ((N * S,), D, None)     # (n*s,) on D, axis=null


def test_reduce_scatter(capsys, tmp_path):
  g = G(); reduce_scatter(g, g.buffer([N * S], D))
  assert final(capsys, tmp_path, g) == ((S,), D, 0)            # (s,) on D, axis=0


def test_allreduce(capsys, tmp_path):
  g = G(); allreduce(g, g.buffer([N * S], D))
  assert final(capsys, tmp_path, g) == ((S,), D, None)         # (s,) on D, axis=null


def test_reduce_scatter_steps(capsys, tmp_path):
  """The axis through each step: reshape keeps 0, permute moves it to 1, copy reshards to 0,
  the sum over axis 1 keeps it, the final reshape keeps it."""
  g = G(); reduce_scatter(g, g.buffer([N * S], D))
  steps = [(n["op"], n["shape"], n["axis"]) for n in props(capsys, tmp_path, g) if n["op"] != "VCONST"]
  assert steps == [("BUFFER", [8], 0), ("RESHAPE", [2, 2, 2], 0), ("PERMUTE", [2, 2, 2], 1), ("COPY", [2, 2, 2], 0),
                   ("REDUCE", [2, 1, 2], 0), ("RESHAPE", [2, 2], 0), ("RESHAPE", [4], 0)]


# ------------------------------------------------------------------ other rows of the table
def test_min_max_rows(capsys, tmp_path):
  g = G()
  i8 = g.add("CONST", arg={"value": 100, "dtype": "int8"})
  add = g.add("ADD", [i8, i8])                                   # 200 can wrap: the int8 range
  pad = g.add("PAD", [g.add("ADD", [g.buffer([2], "CPU", "uint8"), g.add("CONST", arg={"value": 5, "dtype": "uint8"})]), g.shape(1), g.shape(4)])
  cast = g.add("CAST", [g.add("CONST", arg={"value": 300.7, "dtype": "float32"})], "uint8")
  nodes = props(capsys, tmp_path, g)
  assert nodes[add]["min_max"] == [-128, 127]
  assert nodes[pad]["min_max"] == [0, 255]                        # PAD adds 0; uint8 + 5 can wrap
  assert nodes[cast]["min_max"] == [0, 255]                       # saturates at 255; 0 for NaN
  k = G()                                                         # a kernel: RANGE, MOD, CMPLT
  r = k.add("RANGE", [k.add("CONST", arg={"value": 10, "dtype": "index"})], {"id": 0})
  m = k.add("MOD", [r, k.add("CONST", arg={"value": 3, "dtype": "index"})])
  lt = k.add("CMPLT", [r, k.add("CONST", arg={"value": 10, "dtype": "index"})])
  nodes = props(capsys, tmp_path, k)
  assert nodes[r]["min_max"] == [0, 9] and nodes[m]["min_max"] == [0, 2]
  assert nodes[lt]["min_max"] == [1, 1] and nodes[lt]["dtype"] == "bool"


# ------------------------------------------------------------------ tuples
def test_tuple_function_and_gettuple_axes(capsys, tmp_path):
  """TUPLE: its sources' axes; FUNCTION: the body's, with the PARAM standing for the
  sharded argument; GETTUPLE: element idx."""
  g = G()
  x = g.buffer([N * S], D)                                    # axis 0
  p = g.add("PARAM", [g.shape(N * S)], {"slot": 0, "dtype": "float32"})
  neg = g.add("NEG", [p])
  body = g.add("TUPLE", [neg, g.add("REDUCE", [p], {"op": "ADD", "axes": [0]})])
  f = g.add("FUNCTION", [body, x])
  g.add("GETTUPLE", [f], 0)
  g.add("GETTUPLE", [f], 1)
  nodes = props(capsys, tmp_path, g)
  assert [nodes[i]["axis"] for i in (body, f)] == [[None, None], [0, None]]
  assert [n["axis"] for n in nodes[-2:]] == [0, None]
