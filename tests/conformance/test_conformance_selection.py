"""Choosing cases (issue 23): pytest's -k expressions, exact --case ids, manifest exclusions,
and exit 5 when no case runs."""
from __future__ import annotations
import pytest
from hypothesis import given, settings, strategies as st
from tinyspec.cli import main
from tinyspec.conformance.run.selection import Expression, SelectionError, select

IDS = ["ADD/float32", "ADD/int32", "ATOMICADD/float32", "MUL/int32", "MUL/int32-narrowed", "MAX/float32", "IDIV/int32",
       "IDIV/int8-narrowed", "negative/ADD.dtype/invalid-mixed", "CAST/bool-to-float16"]


class C:
  def __init__(self, i): self.id = i


def chosen(*exprs, ids=None) -> list[str]:
  return [c.id for c in select([C(i) for i in IDS], list(exprs), ids)]


@pytest.mark.parametrize("expr, want", [
  ("MAX or IDIV", ["MAX/float32", "IDIV/int32", "IDIV/int8-narrowed"]),
  ("ADD and not float", ["ADD/int32", "negative/ADD.dtype/invalid-mixed"]),
  ("(MUL or ADD) and int32 and not narrowed", ["ADD/int32", "MUL/int32"]),
  ("not not MAX", ["MAX/float32"]),
  ("add/FLOAT32", ["ADD/float32", "ATOMICADD/float32"]),           # substrings, ignoring case: as pytest
  ("ADD/*", ["ADD/float32", "ADD/int32"]),                            # a glob is over the whole id
  ("*-narrowed and IDIV", ["IDIV/int8-narrowed"]),
  ("", IDS),                                                          # an empty -k is no filter, as in pytest
  ("ADD.dtype", ["negative/ADD.dtype/invalid-mixed"]),
])
def test_k_expressions(expr, want):
  assert chosen(expr) == want


def test_several_k_all_hold_and_case_is_exact():
  assert chosen("int32", "not IDIV") == ["ADD/int32", "MUL/int32", "MUL/int32-narrowed"]
  assert chosen(ids=["MUL/int32"]) == ["MUL/int32"]                   # not MUL/int32-narrowed
  assert chosen("not int32", ids=["MUL/int32", "ADD/float32"]) == ["ADD/float32"]


@pytest.mark.parametrize("expr, said", [("MAX or", "at column 7: expected not, left parenthesis or a name; got end of input"),
                                        ("(MAX", "at column 5: expected right parenthesis"),
                                        ("MAX IDIV", "at column 5: expected end of input; got 'IDIV'"),
                                        ("MAX $", "unexpected character '$' at column 5"),
                                        ("and", "at column 1")])
def test_bad_expressions_say_where(expr, said):
  with pytest.raises(SelectionError, match=None) as e: Expression(expr)
  assert said in str(e.value)


def test_an_unknown_case_id_names_the_nearest():
  with pytest.raises(SelectionError) as e: chosen(ids=["ADD/flaot32"])
  assert "--case 'ADD/flaot32': no such case; did you mean 'ADD/float32'" in str(e.value)


# ------------------------------------------------------------------ the same grammar as pytest's own -k
_terms = st.sampled_from(["ADD", "int32", "float", "MUL/int32", "narrowed", "x", "IDIV", "neg", "a.b", "t[1]", "Add"])


@st.composite
def _exprs(draw, depth=0):
  kind = draw(st.integers(0, 4 if depth < 3 else 0))
  if kind == 0: return draw(_terms)
  if kind == 1: return "not " + draw(_exprs(depth + 1))
  if kind == 2: return "(" + draw(_exprs(depth + 1)) + ")"
  return draw(_exprs(depth + 1)) + (" and " if kind == 3 else " or ") + draw(_exprs(depth + 1))


@settings(max_examples=300, deadline=None)
@given(_exprs())
def test_the_grammar_agrees_with_pytests_own(expr):
  """Where pytest is installed, its own -k evaluator (a private module: not a dependency)
  decides every id the same way (a term's substring match, ignoring case)."""
  expression = pytest.importorskip("_pytest.mark.expression")
  theirs = expression.Expression.compile(expr)
  ours = Expression(expr)
  for cid in IDS + ["t[1]", "a.b"]:
    want = theirs.evaluate(lambda term, *_, cid=cid, **__: term.lower() in cid.lower())
    assert ours.matches(cid) == want, (expr, cid)


@pytest.mark.parametrize("expr", ["MAX or", "(a", "a b", "not", ")", "a and or b"])
def test_what_pytest_refuses_is_refused(expr):
  expression = pytest.importorskip("_pytest.mark.expression")
  with pytest.raises(SyntaxError): expression.Expression.compile(expr)
  with pytest.raises(SelectionError): Expression(expr)


# ------------------------------------------------------------------ the command line
def test_the_command_line_selects(capsys):
  assert main(["conformance", "--backend", "ref", "-k", "MAX or IDIV", "--list"]) == 0
  listed = capsys.readouterr().out.split()
  assert "MAX/float32" in listed and "IDIV/int32" in listed and all("max" in x.lower() or "idiv" in x.lower() for x in listed)
  assert main(["conformance", "--backend", "ref", "--case", "ADD/float32", "--list"]) == 0
  assert capsys.readouterr().out.split() == ["ADD/float32"]
  assert main(["conformance", "--backend", "ref", "-k", "ADD/", "-k", "not float", "--list"]) == 0
  listed = capsys.readouterr().out.split()
  assert listed and all("ADD/" in x and "float" not in x for x in listed)


@pytest.mark.parametrize("argv, code, said", [
  (["-k", "IDIV/", "-k", "not IDIV"], 5, "no case matches -k 'IDIV/' and -k 'not IDIV'"),
  (["-k", "MAX or"], 2, "-k 'MAX or': at column 7"),
  (["--case", "ADD/flaot32"], 2, "did you mean 'ADD/float32'"),
])
def test_selection_errors(capsys, argv, code, said):
  assert main(["conformance", "--backend", "ref", *argv, "--list"]) == code
  assert said in capsys.readouterr().err


def test_the_rule_corpus_selects_the_same_way(capsys):
  assert main(["conformance", "-k", "AFTER.src or BITCAST.size", "--list"]) == 0
  listed = capsys.readouterr().out.split()
  assert {x.split("/")[0] for x in listed} == {"AFTER.src", "BITCAST.size"}
  assert main(["conformance", "-k", "no-such-rule"]) == 5


# ------------------------------------------------------------------ manifest exclusions; nothing ran
def test_excluded_cases_are_not_run(tmp_path, capsys):
  m = tmp_path / "m.yaml"
  m.write_text('exclude:\n  "ADD/float32": "hangs this backend (planted)"\n  "NO/such-case": "stale"\n')
  rc = main(["conformance", "--backend", "ref", "--manifest", str(m), "--case", "ADD/float32", "--case", "ADD/int32", "-v",
             "--json", str(tmp_path / "r.json")])
  out, err = capsys.readouterr()
  assert rc == 0, out + err
  assert "SKIP  ref ADD/float32: excluded by the manifest: hangs this backend (planted)" in out
  assert "PASS  ref ADD/int32" in out and "1 passed, 0 failed, 1 skipped" in out
  assert "entries matching no case: NO/such-case" in err
  rc = main(["conformance", "--backend", "ref", "--manifest", str(m), "--case", "ADD/float32"])
  out, err = capsys.readouterr()
  assert rc == 5 and "no case ran" in err, out + err


def test_a_manifest_may_not_misspell_exclude(tmp_path, capsys):
  m = tmp_path / "m.yaml"
  m.write_text('exclued:\n  "ADD/float32": "x"\n')
  assert main(["conformance", "--backend", "ref", "--manifest", str(m), "--case", "ADD/float32"]) == 2
  assert "unknown key 'exclued'; did you mean 'exclude'?" in capsys.readouterr().err
  m.write_text('exclude:\n  "ADD/float32": ""\n')
  assert main(["conformance", "--backend", "ref", "--manifest", str(m), "--case", "ADD/float32"]) == 2
  assert "with a reason for every entry" in capsys.readouterr().err


@pytest.mark.parametrize("expr", ["not " * 5000 + "ADD", "(" * 5000 + "ADD" + ")" * 5000, "ADD or " * 3000 + "MUL"])
def test_a_huge_expression_is_refused_or_evaluated_not_a_traceback(expr, capsys):
  rc = main(["conformance", "--backend", "ref", "-k", expr, "--list"])
  out, err = capsys.readouterr()
  assert rc in (0, 2) and "Traceback" not in err, err
  if rc == 2: assert "nested more than 100 deep" in err
