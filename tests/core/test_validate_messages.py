"""The validator's messages say what they compared (a check's `says:` in spec/ops.yaml:
the counts, ranks, shapes, offsets) and suggest the name a misspelled key, op or dtype
was meant to be, with the node index and the rule id."""
from __future__ import annotations
import json
import pytest
from tinyspec.cli import main
from tinyspec.rules import compile_says, RuleSyntaxError
from tinyspec.tables import tables
from tinyspec.conformance.corpus.rulecases import load_rule_cases, validate_case

T = tables()
INVALID = [c for c in load_rule_cases() if not c.valid]


def _check_of(d):
  """The op check (with a `says`) that diagnostic d reports, or None."""
  od = T.ops.get(d.op)
  for chk in (od.checks if od else ()):
    if chk.rule == d.rule and chk.says is not None and d.message.startswith(chk.msg): return chk
  return None


def test_every_check_that_compares_states_what_it_compared():
  """Over the invalid cases of the rule corpus: every failed check with a `says` carries
  its rendered quantities (a `says` that does not evaluate would be left off silently),
  and every `says` of the tables is exercised by some case."""
  rendered = set()
  for case in INVALID:
    _, res = validate_case(case)
    for d in res.diagnostics:
      chk = _check_of(d)
      if chk is None: continue
      assert d.message.startswith(chk.msg + ": ") and len(d.message) > len(chk.msg) + 3, f"{case.id}: {d.format()}"
      rendered.add((chk.rule, chk.msg))
  says = {(c.rule, c.msg) for od in T.ops.values() for c in od.checks if c.says is not None}
  assert says - rendered == set(), "checks whose `says` no corpus case renders"
  assert len(says) >= 35   # every check that compares quantities has one


def _validate(capsys, tmp_path, doc) -> tuple[int, str]:
  p = tmp_path / "g.json"
  p.write_text(json.dumps(doc))
  rc = main(["validate", str(p)])
  out = capsys.readouterr()
  return rc, out.out + out.err


SHAPE = lambda *d: {"op": "VCONST", "arg": {"values": list(d), "dtype": "index"}}
BUF = {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}}


def test_reshape_and_permute_name_their_numbers(capsys, tmp_path):
  doc = {"nodes": [SHAPE(2, 3), BUF, SHAPE(4, 2), {"op": "RESHAPE", "src": [1, 2]}, {"op": "PERMUTE", "src": [1], "arg": [0, 2]}], "roots": [3, 4]}
  rc, out = _validate(capsys, tmp_path, doc)
  assert rc == 1
  assert "node 3 (RESHAPE): the element counts of the source and target shapes differ: source (2, 3) has 6 elements, target (4, 2) has 8 [RESHAPE.numel]" in out
  assert "node 4 (PERMUTE): arg must be a permutation of the source's axes: perm (0, 2) for a source of rank 2 [PERMUTE.perm]" in out


def test_a_long_shape_is_cut_short_in_a_message(capsys, tmp_path):
  dims = [1] * 40
  doc = {"nodes": [SHAPE(*dims), BUF, {"op": "PERMUTE", "src": [1], "arg": list(range(39))}]}
  rc, out = _validate(capsys, tmp_path, doc)
  assert rc == 1 and "perm (0, 1, 2, 3, 4, 5, 6, 7, ... 31 more) for a source of rank 40 [PERMUTE.perm]" in out


def test_says_templates():
  f = compile_says("a {src[0]} b {sorted({2, 1})} c {list(range(12))}")
  args = ([7],) + (None,) * 9
  assert f(*args) == "a 7 b [1, 2] c (0, 1, 2, 3, 4, 5, 6, 7, ... 4 more)"
  for bad in ("a {src", "a } b", "{__import__('os')}", "{open('x')}"):
    with pytest.raises(RuleSyntaxError): compile_says(bad)


@pytest.mark.parametrize("node, want", [
  ({"op": "NEG", "srcs": [1]}, "node 2 (NEG): unknown field(s) srcs (did you mean 'src'?) [file.schema]"),
  ({"op": "NEG", "src": [1], "agr": 3}, "node 2 (NEG): unknown field(s) agr (did you mean 'arg'?) [file.schema]"),
  ({"op": "NEGG", "src": [1]}, "node 2 (NEGG): unknown op 'NEGG' (did you mean 'NEG'?) [graph.unknown_op]"),
  ({"op": "CONST", "arg": {"value": 1, "dtype": "flaot32"}}, f"node 2 (CONST): arg['dtype']: 'flaot32' is not one of the {len(T.defs['dtype']['enum'])} allowed values (did you mean 'float32'?) [arg.schema]"),
  ({"op": "CONST", "arg": {"value": 1, "dtype": "float32"}, "dtype": "Float23"}, "node 2 (CONST): declared dtype 'Float23' is not a dtype (did you mean 'float32'?), but derived float32 [declared.dtype]"),
  ({"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtyp": "float32", "device": "CPU"}}, "node 2 (BUFFER): arg: 'dtype' is a required property; the arg has 'dtyp' (did you mean 'dtype'?) [arg.schema]"),
  ({"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU", "adrspace": "GLOBAL"}}, "node 2 (BUFFER): arg: unknown key(s) 'adrspace' (did you mean 'addrspace'?)"),
])
def test_did_you_mean(capsys, tmp_path, node, want):
  rc, out = _validate(capsys, tmp_path, {"nodes": [SHAPE(3), BUF, node], "roots": [1, 2]})
  assert rc == 1 and want in out, out


def test_unknown_top_level_key_and_no_suggestion_when_nothing_is_close(capsys, tmp_path):
  rc, out = _validate(capsys, tmp_path, {"nodes": [SHAPE(3), {"op": "XYZZY"}], "root": [1]})
  assert rc == 1
  assert "unknown top-level field(s): root (did you mean 'roots'?) [file.schema]" in out
  assert "node 1 (XYZZY): unknown op 'XYZZY' [graph.unknown_op]" in out


def test_a_bad_source_or_root_says_which_nodes_there_are(capsys, tmp_path):
  rc, out = _validate(capsys, tmp_path, {"nodes": [SHAPE(3), BUF, {"op": "NEG", "src": [7]}, {"op": "NEG", "src": [3]}], "roots": [9]})
  assert rc == 1
  assert "node 2 (NEG): src 7 refers to no node; node 2 may use nodes 0 to 1 [graph.src]" in out
  assert "node 3 (NEG): src 3 refers to itself (a cycle); node 3 may use nodes 0 to 2 [graph.src]" in out
  assert "root 9 is not a node index (the graph has nodes 0 to 3) [graph.src]" in out
