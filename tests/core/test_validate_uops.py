"""The validator checks UOps as they are: validate(UOp or roots) runs the pass validate(Graph)
runs (no Graph is built on the way), and gives the same rule ids, in the same order, on
every case of the rule corpus that UOps can spell; its diagnostics name each node by its
place in ValidationResult.uops."""
from __future__ import annotations
import pytest
from tinyspec import graph as G
from tinyspec.conformance.corpus.rulecases import load_rule_cases
from tinyspec.graph import load_file
from tinyspec.uop import UOp
from tinyspec.validate import validate, derive_uop, DerivationError


def _as_uops():
  """(case id, its Graph, its root UOps, its level) for every rule case UOps can spell (a
  source that is no earlier node, a root out of range, a broken file cannot be a UOp)."""
  out = []
  for c in load_rule_cases():
    g, diags = load_file(c.input)
    if g is None or diags: continue
    try: roots = g.root_uops()
    except ValueError: continue
    out.append((c.id, g, roots, c.level if c.level != "auto" else (g.level or "auto")))
  return out


CASES = _as_uops()


def test_most_rule_cases_are_checked_as_uops():
  assert len(CASES) >= 200


def test_uops_give_the_files_rule_ids_on_the_rule_corpus():
  differ = []
  for cid, g, roots, level in CASES:
    by_file, by_uops = validate(g, level), validate(roots, level)
    if [(d.rule, d.op) for d in by_file.diagnostics] != [(d.rule, d.op) for d in by_uops.diagnostics]: differ.append(cid)
    if by_uops.ok: assert [v.dtype for v in by_uops.views] == [u.props.dtype for u in by_uops.uops], cid
  assert differ == []


def _shape(n): return UOp("VCONST", (), {"values": [n], "dtype": "index"})
def _buffer(n, slot): return UOp("BUFFER", (_shape(n),), {"slot": slot, "dtype": "float32", "device": "CPU"})


def test_a_diagnostic_names_the_uop_its_op_and_rule():
  bad = UOp("RESHAPE", (_buffer(6, 0), _shape(4)))
  res = validate([UOp("NEG", (bad,))], "tensor")
  [d] = res.diagnostics
  assert (d.rule, d.op, res.uops[d.node]) == ("RESHAPE.numel", "RESHAPE", bad)
  assert d.format().startswith(f"<graph>: node {d.node} (RESHAPE): ") and d.format().endswith("[RESHAPE.numel]")


def test_no_graph_is_built_to_check_uops(monkeypatch):
  """validate(UOps) and derive_uop (UOp.props's checked sibling, the front end's) walk the
  UOps: a Node or Graph made on the way fails here."""
  def refuse(*a, **k): raise AssertionError("a graph file's Node/Graph was built")
  monkeypatch.setattr(G.Node, "__init__", refuse)
  monkeypatch.setattr(G.Node, "_checked", classmethod(refuse))
  monkeypatch.setattr(G.Graph, "__init__", refuse)
  x = UOp("ADD", (_buffer(5, 0), _buffer(5, 1)))
  assert validate(x).ok
  y = UOp("MUL", (x, UOp("SQRT", (x,))))
  for u in (x, *x.src, y, y.src[1]): u._props, u._checked = None, False
  assert derive_uop(y, "tensor").shape == (5,)
  with pytest.raises(DerivationError, match="RESHAPE.numel"): derive_uop(UOp("RESHAPE", (_buffer(6, 2), _shape(4))))
