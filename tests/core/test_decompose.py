"""Structure of the decompositions: every decomposed op, for every dtype its slots allow,
flattens to primitive steps and expands into a valid graph of the same dtype and shape.
Numbers are checked in test_decompose_numeric.py."""
import sys
import pytest
from tinyspec import Graph, Node, UOp, validate
from tinyspec.tables import tables
from tinyspec import decompose as D
from tinyspec.decompose import DecompositionError, decompose, decomposition_of, flatten


def op_dtype_cases():
  """(op, dtype) for every decomposed op and every dtype its first slot allows."""
  T = tables()
  for name in sorted(D.decomposed_ops()):
    od = T.ops[name]
    allowed = od.slots[0].allowed()
    for dt in sorted(allowed if allowed is not None else (n for n in D.DTYPES if n != "void")):
      yield name, dt


CASES = list(op_dtype_cases())
COPY_ARG = {"device": "GPU"}


def arg_for(op):
  return COPY_ARG if "$arg." in str(tables().ops[op].decomposition) else None


def primitives():
  return {n for n in tables().ops if n not in D.decomposed_ops()}


def graph_of(op, dt, shapes=None):
  """BUFFERs of dtype dt (shape (4,) or as given) for op's fixed slots, then the op."""
  od = tables().ops[op]
  slots = [s for s in od.slots if not (s.optional or s.variadic)]
  shapes = shapes or [(4,)] * len(slots)
  nodes, srcs = [], []
  for k, (s, shp) in enumerate(zip(slots, shapes)):
    allowed = s.allowed()
    sdt = next(iter(allowed)) if allowed is not None and len(allowed) == 1 else dt
    nodes.append(Node("VCONST", (), {"values": list(shp), "dtype": "index"}))
    nodes.append(Node("BUFFER", (len(nodes) - 1,), {"slot": k, "dtype": sdt, "device": "CPU"}))
    srcs.append(len(nodes) - 1)
  nodes.append(Node(op, srcs, arg_for(op)))
  return Graph(nodes)


def test_every_decomposed_op_is_covered():
  ops = {op for op, _ in CASES}
  assert ops == D.decomposed_ops()
  assert {"EXP2", "LOG2", "SIN", "SQRT", "POW", "THREEFRY", "NEG", "SUB", "DIV", "MULACC"} <= ops


@pytest.mark.parametrize("op,dt", CASES)
def test_decomposition_uses_only_primitives(op, dt):
  steps = decomposition_of(op, dt, arg=arg_for(op))
  used = {s["op"] for s in steps}
  assert used and used <= primitives(), used - primitives()
  # every source is an input slot, an earlier step, or a typed constant
  names = {s.name for s in tables().ops[op].slots}
  for s in steps:
    for x in s["src"]:
      assert (isinstance(x, dict) and set(x) == {"const", "dtype"}) or x in names, (s, x)
    names.add(s["as"])


@pytest.mark.parametrize("op,dt", CASES)
def test_expansion_validates_with_the_same_dtype_and_shape(op, dt):
  g = graph_of(op, dt)
  before = validate(g)
  assert before.ok, before.diagnostics
  e = decompose(g)
  after = validate(e)
  assert after.ok, [d.format() for d in after.diagnostics[:5]]
  root_before, root_after = before.views[-1], after.views[e.root_indices[0]]
  assert (root_after.dtype, root_after.shape) == (root_before.dtype, root_before.shape)
  assert not {n.op for n in e.nodes} & D.decomposed_ops()


def test_broadcast_shapes_are_kept():
  for op, shapes in (("SUB", [(3, 1), (1, 4)]), ("POW", [(2, 1, 5), (5,)]), ("MULACC", [(3, 1), (1, 4), ()]),
                     ("THREEFRY", [(6,), ()]), ("CMPGE", [(2, 3), (3,)])):
    g = graph_of(op, "float32" if op != "THREEFRY" else "uint64", shapes)
    want = validate(g).views[-1].shape
    e = decompose(g)
    res = validate(e)
    assert res.ok and res.views[e.root_indices[0]].shape == want, (op, want)


def test_constants_are_scalar_consts():
  e = decompose(graph_of("EXP2", "float32"))
  consts = [n for n in e.nodes if n.op == "CONST"]
  assert consts and all(validate(Graph([Node("CONST", (), c.arg)])).views[0].shape == () for c in consts[:5])


def test_expand_only_the_named_ops():
  g = graph_of("SQRT", "float32")
  e = decompose(g, ops={"SQRT"})
  ops = {n.op for n in e.nodes}
  assert "SQRT" not in ops and {"LOG2", "EXP2"} <= ops
  assert validate(e).ok
  # float16 computes through float32: the casts come with it
  e16 = decompose(graph_of("SQRT", "float16"), ops={"SQRT"})
  assert [n.arg for n in e16.nodes if n.op == "CAST"] == ["float32", "float16"]
  # nested decomposed ops outside the set stay
  e2 = decompose(graph_of("LOG2", "float32"), ops={"LOG2"})
  assert {"SUB", "DIV"} <= {n.op for n in e2.nodes}
  assert validate(e2).ok


def test_expand_default_leaves_only_primitives_and_other_nodes_untouched():
  g = Graph([Node("VCONST", (), {"values": [3], "dtype": "index"}),
             Node("BUFFER", (0,), {"slot": 0, "dtype": "float32", "device": "CPU"}),
             Node("SIN", (1,)), Node("ADD", (1, 2)), Node("NEG", (3,))])
  e = decompose(g)
  assert validate(e).ok
  assert not {n.op for n in e.nodes} & D.decomposed_ops()
  assert sum(n.op == "BUFFER" for n in e.nodes) == 1 and e.nodes[-1].op == "MUL"   # NEG -> MUL(x, -1)


def test_declared_dtype_shape_and_name_carry_over():
  g = Graph([Node("VCONST", (), {"values": [3], "dtype": "index"}),
             Node("BUFFER", (0,), {"slot": 0, "dtype": "int8", "device": "CPU"}),
             Node("NEG", (1,), dtype="int8", shape=[3], name="negated")])
  e = decompose(g)
  root = e.nodes[e.root_indices[0]]
  assert (root.op, root.dtype, root.shape, root.name) == ("MUL", "int8", (3,), "negated")
  assert validate(e).ok


def test_uops_in_uops_out_and_hash_consing():
  shape = UOp("VCONST", (), {"values": [4], "dtype": "index"})
  a = UOp("BUFFER", (shape,), {"slot": 0, "dtype": "float32", "device": "CPU"})
  b = UOp("BUFFER", (shape,), {"slot": 1, "dtype": "float32", "device": "CPU"})
  s1, s2 = UOp("SUB", (a, b)), UOp("EXP2", (a,))
  r = decompose(s1)
  assert isinstance(r, UOp) and r.op == "ADD" and r is decompose(UOp("SUB", (a, b)))
  both = decompose([s1, s2])
  assert isinstance(both, list) and both[0] is r and both[1].op == "WHERE"
  # the same input expanded twice shares one subgraph
  g = Graph.from_uops(UOp("ADD", (UOp("EXP2", (a,)), UOp("EXP2", (a,)))))
  n_one = len(decompose(Graph.from_uops(UOp("EXP2", (a,)))).nodes)
  assert len(decompose(g).nodes) == n_one + 1


def test_uops_are_decomposed_without_a_graph(monkeypatch):
  """UOps in, UOps out, and no Graph on the way (the validator and the rewrite walk the
  UOps): a file's Node or Graph made meanwhile fails here."""
  from tinyspec import graph as G
  shape = UOp("VCONST", (), {"values": [3], "dtype": "index"})
  a, b = (UOp("BUFFER", (shape,), {"slot": k, "dtype": "float16", "device": "CPU"}) for k in (0, 1))
  x = UOp("MUL", (UOp("SUB", (a, b)), UOp("SQRT", (UOp("POW", (a, b)),))))
  def refuse(*args, **kw): raise AssertionError("a graph file's Node/Graph was built")
  monkeypatch.setattr(G.Node, "__init__", refuse)
  monkeypatch.setattr(G.Graph, "__init__", refuse)
  r = decompose(x)
  assert r.op == "MUL" and {u.op for u in r.toposort()}.isdisjoint(D.decomposed_ops()) and validate(r).ok


def test_linear_program_lists_the_new_nodes():
  g = Graph([Node("CONST", (), {"value": 1.5, "dtype": "float32"}),
             Node("CONST", (), {"value": 0.25, "dtype": "float32"}),
             Node("SUB", (0, 1)), Node("EXP2", (2,)),
             Node("LINEAR", (0, 1, 2, 3))], level="program")
  assert validate(g).ok
  e = decompose(g)
  res = validate(e)
  assert res.ok, [d.format() for d in res.diagnostics[:5]]
  lin = e.nodes[e.root_indices[0]]
  assert lin.op == "LINEAR" and len(lin.src) == len(e.nodes) - 1   # every instruction listed once


def test_chain_of_100k_nodes():
  nodes = [Node("VCONST", (), {"values": [2], "dtype": "index"}), Node("BUFFER", (0,), {"slot": 0, "dtype": "int32", "device": "CPU"})]
  for i in range(100_000):
    nodes.append(Node("SUB" if i % 2 else "NEG", (len(nodes) - 1,) if i % 2 == 0 else (len(nodes) - 1, 1)))
  limit = sys.getrecursionlimit()
  sys.setrecursionlimit(400)   # any recursion over the chain would fail at once
  try:
    e = decompose(Graph(nodes))
  finally:
    sys.setrecursionlimit(limit)
  assert not {n.op for n in e.nodes} & D.decomposed_ops()
  assert len(e.nodes) >= 100_000 and validate(e).ok   # NEG(x) = MUL(x, -1); the -B of every SUB is one shared node


def test_bad_input_is_a_clear_error():
  bad = Graph([Node("CONST", (), {"value": 1, "dtype": "int32"}), Node("EXP2", (0,))])
  with pytest.raises(DecompositionError, match="invalid graph"):
    decompose(bad)
  with pytest.raises(DecompositionError, match="no decomposition for ADD"):
    decompose(graph_of("SUB", "int32"), ops={"ADD"})
  with pytest.raises(DecompositionError, match="no decomposition"):
    decomposition_of("ADD", "int32")
  with pytest.raises(DecompositionError, match="arg"):
    decomposition_of("COPY", "float32")   # COPY's decomposition reads its arg


def test_template_errors_name_the_step(monkeypatch):
  broken = {**D.templates(), "exp2": {"inputs": ["T"], "params": {"float32": {}},
                                      "steps": [{"as": "x", "op": "ADD", "src": ["T", "nope"]}]}}
  monkeypatch.setattr(D, "templates", lambda: broken)
  monkeypatch.setattr(D, "_flat_cache", {})
  with pytest.raises(DecompositionError, match=r"template exp2 > step 0: ADD: unknown name 'nope'"):
    flatten("EXP2", ("float32",))
  with pytest.raises(DecompositionError, match="no parameters for dtype float64"):
    flatten("EXP2", ("float64",))
  broken["exp2"] = {"inputs": ["T"], "steps": [{"op": "ADD", "src": ["T", {"const": 1, "dtype": "int32"}]}]}
  with pytest.raises(DecompositionError, match=r"step 0: ADD: .*dtype"):
    flatten("EXP2", ("float32",))
  broken["exp2"] = {"inputs": ["T"], "steps": [{"as": "y", "use": "exp2", "src": ["T"]}]}
  with pytest.raises(DecompositionError, match="cycle"):
    flatten("EXP2", ("float32",))


def test_constants_wrap_into_the_dtype():
  assert D.const_value(-1, "uint32") == 0xFFFFFFFF and D.const_value(0xFFFFF000, "int32") == -4096
  assert D.const_value(1, "bool") is True and D.const_value("nan", "float16") == "nan" and D.const_value(2, "float32") == 2.0
  neg = decomposition_of("NEG", "uint8")
  assert neg == [{"as": "t", "op": "MUL", "src": ["T", {"const": 255, "dtype": "uint8"}]}]


def test_templates_are_all_used_and_all_defined():
  tpl = D.templates()
  named = {o.decomposition["template"] for o in tables().ops.values() if isinstance(o.decomposition, dict)}
  assert named <= set(tpl)
  used = set(named) | set(D.CAST_BACK_TEMPLATES)
  for t in tpl.values():
    used |= {s["use"] for s in t["steps"] if "use" in s}
  assert used == set(tpl)
