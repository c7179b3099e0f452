"""One derivation of a node's properties (tinyspec/props.py): props(u), which UOp.props
and the compiler use, gives the validator's Views on every op's example; a planted change
of an op's derive rules reaches the validator and props alike; a node the rules refuse is
named with its op and rule, and nothing is stored for it."""
from __future__ import annotations
import pytest
from tinyspec.graph import from_document
from tinyspec.props import props, DerivationError
from tinyspec.tables import tables, PROPS
from tinyspec.uop import UOp
from tinyspec.validate import validate, check_node


def graph(nodes):
  g, diags = from_document(nodes)
  assert not diags
  return g


def seen(v) -> tuple: return tuple(repr(getattr(v, p)) for p in PROPS) + (repr(v.value),)


def fresh_uops(g) -> list:
  uops = g.uops()
  for u in uops: u._props, u._checked = None, False    # hash-consed: forget what other tests derived
  return uops


@pytest.mark.parametrize("op", [n for n, o in tables().ops.items() if o.example])
def test_props_gives_validates_views_on_every_op_example(op):
  """Whatever the example's level (tensor, kernel, program), props derives what the
  validator derives: the level reaches no derived property's value."""
  g = graph(tables().ops[op].example)
  res = validate(g)
  assert res.ok
  uops = fresh_uops(g)
  props(uops[g.root_indices[-1]])
  assert [seen(u._props) for u in uops] == [seen(v) for v in res.views]
  assert uops[-1].props is uops[-1]._props     # UOp.props is props


def _buffer(n: int, slot: int) -> UOp:
  return UOp("BUFFER", (UOp("VCONST", (), {"values": [n], "dtype": "index"}),), {"slot": slot, "dtype": "float32", "device": "CPU"})


def test_a_refused_node_is_named_and_nothing_is_stored():
  bad = UOp("ADD", (_buffer(3, 0), _buffer(4, 1)))
  top = UOp("NEG", (bad,))
  with pytest.raises(DerivationError) as e: _ = top.props
  d = e.value.diagnostics[0]
  assert (d.rule, d.op, e.value.node) == ("shape.broadcast", "ADD", bad)
  assert d.message.startswith("ADD: shapes (3,), (4,) do not broadcast") and "[shape.broadcast]" in str(e.value)
  assert bad._props is None and top._props is None and bad.src[0]._props is not None
  with pytest.raises(DerivationError, match=r"unknown op 'NOPE' \[graph.unknown_op\]"): props(UOp("NOPE"))


def test_a_planted_derive_rule_reaches_the_validator_and_props(monkeypatch):
  """Both run the op's derive_all: a second derivation beside it would miss the plant."""
  T = tables()
  neg = T.ops["NEG"]
  real = neg.derive_all
  def planted(src, arg, op, level, node):
    dt, *rest = real(src, arg, op, level, node)
    return ("float16" if dt == "float32" else dt, *rest)
  monkeypatch.setattr(neg, "derive_all", planted)
  monkeypatch.delitem(T.__dict__, "_validate_infos", raising=False)   # the validator's per-op cache
  x = UOp("NEG", (_buffer(7, 0),))
  x._props = None
  g = graph([{"op": "VCONST", "arg": {"values": [7], "dtype": "index"}},
             {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}}, {"op": "NEG", "src": [1]}])
  assert validate(g).views[-1].dtype == "float16"
  assert check_node("NEG", [_buffer(7, 0).props], None).dtype == "float16"
  assert props(x).dtype == "float16"
  monkeypatch.undo()
  x._props = None
  assert x.props.dtype == "float32"


def test_a_node_props_derived_unchecked_is_still_checked_by_the_validator():
  """props() derives without the checks; UOps are hash-consed, so the node a compiler derived
  is the node a front end builds next: derive_uop must check it, not take the cached View."""
  from tinyspec.validate import derive_uop
  bad = UOp("NEG", (_buffer(5, 0),), {"not_an_arg": 1})
  bad._props, bad._checked = None, False
  assert bad.props.shape == (5,)     # derived: no derived.yaml rule reads the arg
  for level in ("auto", "tensor"):
    with pytest.raises(DerivationError) as e: derive_uop(bad, level=level)
    assert e.value.diagnostics[0].op == "NEG" and e.value.diagnostics[0].rule.startswith("arg")
  ok = UOp("NEG", (_buffer(5, 1),))
  ok._props, ok._checked = None, False     # hash-consed: forget what other tests derived
  assert ok.props.shape == (5,) and not ok._checked
  assert derive_uop(ok, level="tensor").shape == (5,) and ok._checked
