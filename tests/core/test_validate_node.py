"""Node-by-node checking (check_node, derive_uop) gives validate()'s answers, and the roles
the validator gives ops (storage, shape-operand folding, closed bodies, levels of nested
graphs) come from keys of spec/ops.yaml, not from Python."""
from __future__ import annotations
import shutil
from pathlib import Path
import pytest
import importlib
from tinyspec.graph import Graph, from_document
from tinyspec.tables import Tables, tables, PROPS
from tinyspec.uop import UOp
from tinyspec.validate import validate, check_node, derive_uop, DerivationError, View
V = importlib.import_module("tinyspec.validate")   # the module (the package exports the function under this name)

ROOT = Path(__file__).resolve().parents[2]


def graph(nodes) -> Graph:
  g, diags = from_document(nodes)
  assert not diags
  return g


def props(v) -> tuple: return tuple(repr(getattr(v, p)) for p in PROPS) + (repr(v.value),)


def shape(*dims): return UOp("VCONST", (), {"values": list(dims), "dtype": "index"})
def const(v, dt="float32"): return UOp("CONST", (), {"value": v, "dtype": dt})
def buffer(*dims, slot=0, dt="float32"): return UOp("BUFFER", (shape(*dims),), {"slot": slot, "dtype": dt, "device": "CPU"})


# ------------------------------------------------------------------ check_node == validate
@pytest.mark.parametrize("op", [n for n, o in tables().ops.items() if o.example])
def test_check_node_gives_validates_views_on_every_op_example(op):
  g = graph(tables().ops[op].example)
  res = validate(g)
  assert res.ok
  ctx = V._contexts(g, res.level, {n.op for n in g.nodes}, tables())
  mine = []
  for i, n in enumerate(g.nodes):
    level = res.level if ctx is None else V._FIRST_LEVEL[ctx[i]]
    v = check_node(n.op, [mine[j] for j in n.src], n.arg, level=level, index=i)
    assert isinstance(v, View), [d.format() for d in v]
    assert props(v) == props(res.views[i]), (i, n.op)
    mine.append(v)


@pytest.mark.parametrize("op", [n for n, o in tables().ops.items() if o.example])
def test_derive_uop_gives_validates_views_on_every_op_example(op):
  g = graph(tables().ops[op].example)
  res = validate(g)
  uops = g.uops()
  for u in uops: u._props, u._checked = None, False                  # hash-consed: forget what other tests derived
  derive_uop(uops[g.root_indices[-1]])
  assert [props(u._props) for u in uops] == [props(v) for v in res.views]


def test_check_node_reports_rule_ids():
  six = View(None, "BUFFER", None, [])
  six.dtype, six.shape, six.device = "float32", (6,), "CPU"
  out = check_node("RESHAPE", [six, check_node("VCONST", [], {"values": [2, 4], "dtype": "index"})], None)
  assert [d.rule for d in out] == ["RESHAPE.numel"] and out[0].op == "RESHAPE"
  bound = check_node("CONST", [], {"value": 4, "dtype": "index"})
  assert [d.rule for d in check_node("RANGE", [bound], {"id": 0}, level="tensor")] == ["level.op"]
  assert isinstance(check_node("RANGE", [bound], {"id": 0}, level="kernel"), View)
  assert [d.rule for d in check_node("NOPE", [], None)] == ["graph.unknown_op"]
  assert [d.rule for d in check_node("CONST", [], {"value": 1}, level="tensor")] == ["arg.schema"]
  assert [d.rule for d in check_node("CONST", [], {"value": 1, "dtype": "int32"}, dtype="float32")] == ["declared.dtype"]
  assert [d.rule for d in check_node("NEG", [bound, bound], None)] == ["graph.arity"]
  with pytest.raises(TypeError): check_node("NEG", [None], None)
  with pytest.raises(ValueError): check_node("NEG", [bound], None, level="kernel-ish")


def test_check_node_folds_shape_operands():
  """VCONST, CONST and STACK of index constants hold their dims (ops.yaml `fold:`)."""
  a, b = (check_node("CONST", [], {"value": v, "dtype": "index"}) for v in (2, 3))
  assert (a.value, check_node("STACK", [a, b], None).value) == (2, (2, 3))
  assert check_node("VCONST", [], {"values": [4, 5], "dtype": "index"}).value == (4, 5)
  assert check_node("VCONST", [], {"values": [4, 5], "dtype": "int32"}).value is None   # only index nodes fold


# ------------------------------------------------------------------ derive_uop is incremental
def test_derive_uop_checks_only_new_nodes(monkeypatch):
  x = buffer(4)
  for k in range(300): x = UOp("ADD", (x, const(float(k))))
  derive_uop(x)
  calls = []
  real = V._check
  monkeypatch.setattr(V, "_check", lambda *a: calls.append(a[1]) or real(*a))
  y = UOp("MUL", (x, x))
  assert derive_uop(y, level="tensor").shape == (4,) and calls == ["MUL"]
  z = UOp("NEG", (UOp("SQRT", (y,)),))
  assert derive_uop(z).dtype == "float32" and calls == ["MUL", "SQRT", "NEG"]
  assert y._props is not None and x._props.shape == (4,)


def test_derive_uop_refuses_an_invalid_node_and_stores_nothing():
  bad = UOp("RESHAPE", (buffer(6, slot=3), shape(4)))
  top = UOp("NEG", (bad,))
  with pytest.raises(DerivationError) as e: derive_uop(top)
  assert [d.rule for d in e.value.diagnostics] == ["RESHAPE.numel"]
  assert top._props is None and bad._props is None


def test_derive_uop_puts_a_called_sink_at_kernel_level():
  """CALL's body slot says a SINK is a kernel: its RANGE and END are fine in a tensor graph."""
  p = UOp("PARAM", (shape(4),), {"slot": 0, "dtype": "float32"})
  r = UOp("RANGE", (const(4, "index"),), {"id": 0, "type": "LOOP"})
  kernel = UOp("SINK", (UOp("END", (UOp("STORE", (UOp("INDEX", (p, r)), const(1.0))), r)),))
  call = UOp("CALL", (kernel, buffer(4, slot=7)))
  assert derive_uop(call, level="tensor").dtype == "void"
  # not below a CALLed SINK; a RANGE no other test makes (UOps are hash-consed and keep the
  # props derived for them: one derived at kernel level elsewhere in this process would pass)
  outside = UOp("RANGE", (const(12347, "index"),), {"id": 1, "type": "LOOP"})
  with pytest.raises(DerivationError, match="level.op"): derive_uop(UOp("NEG", (outside,)), level="tensor")


# ------------------------------------------------------------------ levels of a graph
@pytest.mark.parametrize("root,level", [("LINEAR", "program"), ("PROGRAM", "program"), ("CALL", "tensor"), ("END", "kernel"),
                                        ("ADD", "tensor")])
def test_detect_level_from_the_examples(root, level):
  g = graph(tables().ops[root].example)
  assert V.detect_level(g, tables()) == level and validate(g).ok


def test_call_of_a_program_is_a_tensor_graph():
  """CALL's body slot: a PROGRAM (and what its slots hold) is at program level."""
  prog = tables().ops["PROGRAM"].example
  n = len(prog)
  nodes = prog + [{"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "int32", "device": "CPU"}}, {"op": "CALL", "src": [n - 1, n]}]
  res = validate(graph(nodes))
  assert res.ok and res.level == "tensor", [d.format() for d in res.diagnostics]


# ------------------------------------------------------------------ the roles are table data
EDITS = {   # one key taken away from a copy of spec/ops.yaml
  "storage": ('    arg: {$ref: "#/$defs/buffer_arg"}\n    storage: true\n', '    arg: {$ref: "#/$defs/buffer_arg"}\n'),
  "fold": ("    fold: values\n", ""),
  "level": ("[{name: uops, kind: listing, variadic: true, level: program}]", "[{name: uops, kind: listing, variadic: true}]"),
  "body": ('    src: [{name: body, kind: body}, {name: a, kind: value, dtype: any, variadic: true}]\n    arg: {type: "null"}',
           '    src: [{name: body, kind: any}, {name: a, kind: value, dtype: any, variadic: true}]\n    arg: {type: "null"}'),
}


@pytest.fixture(scope="module")
def edited(tmp_path_factory):
  """key -> the shipped tables with that edit of EDITS."""
  out = {}
  for key, (old, new) in EDITS.items():
    d = tmp_path_factory.mktemp(key)
    text = (ROOT / "spec" / "ops.yaml").read_text()
    assert text.count(old) == 1, old
    (d / "ops.yaml").write_text(text.replace(old, new))
    shutil.copy(ROOT / "spec" / "derived.yaml", d / "derived.yaml")
    out[key] = Tables(ops_path=d / "ops.yaml", derived_path=d / "derived.yaml")
  return out


def _rules(T, nodes):
  return sorted({d.rule for d in validate(graph(nodes), tables=T).diagnostics})


def test_storage_is_read_from_the_table(edited):
  """BUFFER without `storage: true` is no STORE target."""
  store = tables().ops["STORE"].example
  assert _rules(tables(), store) == [] and _rules(edited["storage"], store) == ["STORE.target"]


def test_shape_operand_folding_is_read_from_the_table(edited):
  """VCONST without `fold: values` holds no dims."""
  ex = tables().ops["BUFFER"].example
  assert _rules(tables(), ex) == [] and _rules(edited["fold"], ex) == ["shape.operand"]


def test_nested_levels_are_read_from_the_table(edited):
  """LINEAR without its slot `level: program` no longer makes a program."""
  ex = tables().ops["LINEAR"].example
  assert _rules(tables(), ex) == [] and _rules(edited["level"], ex) == ["level.op"]


def test_closed_bodies_are_read_from_the_table(edited):
  """An inner FUNCTION binds its PARAM 1; the outer one, with one argument, sees it only
  when the inner body slot is not `kind: body`."""
  nodes = [{"op": "VCONST", "arg": {"values": [3], "dtype": "index"}},
           {"op": "PARAM", "src": [0], "arg": {"slot": 0, "dtype": "float32"}},
           {"op": "PARAM", "src": [0], "arg": {"slot": 1, "dtype": "float32"}},
           {"op": "ADD", "src": [1, 2]},
           {"op": "TUPLE", "src": [3]},
           {"op": "FUNCTION", "src": [4, 1, 1]},                 # inner: PARAMs 0 and 1 bound to outer PARAM 0
           {"op": "GETTUPLE", "src": [5], "arg": 0},
           {"op": "TUPLE", "src": [6]},
           {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
           {"op": "FUNCTION", "src": [7, 8]}]                    # outer: one argument
  assert _rules(tables(), nodes) == [] and _rules(edited["body"], nodes) == ["FUNCTION.param"]


def test_unknown_table_keys_are_refused(tmp_path):
  text = (ROOT / "spec" / "ops.yaml").read_text().replace("    fold: stack\n", "    fold: sideways\n")
  (tmp_path / "ops.yaml").write_text(text)
  with pytest.raises(ValueError, match="fold 'sideways'"): Tables(ops_path=tmp_path / "ops.yaml")
