"""case.json against spec/case.schema.json (issue 32: an `outputs.NAME.portable` that was not
a table ended the whole conformance run; the sha256 pin does not cover case.json). Every
field of a positive and a negative case, given a value of every wrong type, makes that
case an ERROR with rule file.schema naming the field, in `tinyspec conformance` and in the
pytest plugin: the other cases run, nothing raises. The fast walk the loader uses
(conformance/corpus/caseschema.py) refuses what jsonschema refuses, and only that."""
from __future__ import annotations
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
import jsonschema
from hostile import cli, ROOT

CASES = ROOT / "conformance" / "cases"
POSITIVE = "LOG2/float32"         # with a `portable` table (its bounds and alternatives)
NEGATIVE = next(p.parent.relative_to(CASES).as_posix() for p in sorted((CASES / "negative").rglob("case.json")))
WRONG = [0, 1, -1, 1.5, math.nan, math.inf, "", "x", "inf", "\x00", [], [1], ["x", "y"], {}, {"x": 1}, True, False, None]


def paths(v, where=()):
  """Every place in a JSON document: the path of each value, nested ones too."""
  yield where
  items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
  for k, x in items: yield from paths(x, where + (k,))


def replaced(doc, where: tuple, value):
  doc = json.loads(json.dumps(doc))
  if not where: return value
  node = doc
  for k in where[:-1]: node = node[k]
  node[where[-1]] = value
  return doc


def documents() -> list:
  out = []
  for name in (POSITIVE, NEGATIVE):
    doc = json.loads((CASES / name / "case.json").read_text())
    out.append(doc)
    for where in paths(doc):
      out += [replaced(doc, where, w) for w in WRONG]
    out += [dict(doc, unknown=1), {k: v for k, v in doc.items() if k != "kind"}]
  return out


def test_the_cases_used_have_what_is_mutated():
  pos = json.loads((CASES / POSITIVE / "case.json").read_text())
  assert any("portable" in o and o["portable"]["alternatives"] for o in pos["outputs"].values())
  assert "expect" in json.loads((CASES / NEGATIVE / "case.json").read_text())


def test_the_fast_check_refuses_what_the_schema_refuses():
  from tinyspec.conformance.corpus.caseschema import check, case_schema, Mismatch
  schema = jsonschema.Draft202012Validator(case_schema())
  docs = documents()
  assert len(docs) > 1000
  for doc in docs:
    try: check(doc); ours = True
    except Mismatch: ours = False
    nan = any(isinstance(x, float) and math.isnan(x) for x in _values(doc))
    assert ours == (schema.is_valid(doc) and not nan), json.dumps(doc)[:300]     # (jsonschema's `minimum` lets NaN through)


def _values(v):
  if isinstance(v, dict): return [y for x in v.values() for y in _values(x)]
  if isinstance(v, list): return [y for x in v for y in _values(x)]
  return [v]


def test_every_wrong_field_is_a_case_error_never_an_exception(tmp_path):
  """_case reads each mutated case.json: a CaseError naming the field and rule file.schema,
  or (a value of the right type) a case; never another exception."""
  from tinyspec.conformance.corpus.cases import _case, CaseError
  refused = 0
  for k, doc in enumerate(documents()):
    f = tmp_path / f"c{k}" / "case.json"
    f.parent.mkdir()
    f.write_text(json.dumps(doc))
    try: _case(f, tmp_path)
    except CaseError as e:
      refused += 1
      assert "[file.schema]" in str(e) or "[file.parse]" in str(e), str(e)
  assert refused > 900


def test_a_portable_that_is_not_a_table_is_that_cases_error(tmp_path):
  """The issue's cases (portable: 1, "x", [1], true): the run goes on, each bad case an
  ERROR naming the field."""
  shutil.copytree(CASES / "NEG" / "float32", tmp_path / "cases" / "NEG" / "float32")
  for k, value in enumerate([1, "x", [1], True]):
    bad = tmp_path / "cases" / f"BAD{k}"
    shutil.copytree(CASES / POSITIVE, bad)
    doc = json.loads((bad / "case.json").read_text())
    for o in doc["outputs"].values(): o["portable"] = value
    doc["id"] = f"BAD{k}"
    (bad / "case.json").write_text(json.dumps(doc))
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "cases")
  assert rc == 1 and all(f"ERROR ref BAD{k}" in text for k in range(4)), text
  assert text.count("outputs.out0.portable") >= 4 and "[file.schema]" in text, text
  assert "1 passed" in text and "4 errors" in text and "Traceback" not in text, text


def test_the_pytest_plugin_reports_a_broken_case_and_runs_the_others(tmp_path):
  shutil.copytree(CASES / "NEG" / "float32", tmp_path / "cases" / "NEG" / "float32")
  bad = tmp_path / "cases" / "BAD"
  bad.mkdir()
  (bad / "case.json").write_text(json.dumps({"format": "tinyspec-case", "kind": "positive", "graph": "g.json",
                                             "outputs": {"out0": {"file": "o.npy", "dtype": "float32", "portable": [1]}}}))
  r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--pyargs", "tinyspec.conformance",
                      "--tinyspec-backend=ref", f"--tinyspec-cases={tmp_path / 'cases'}", "-q"],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path)
  text = r.stdout + r.stderr
  assert r.returncode == 1 and "1 passed, 1 error" in text and "outputs.out0.portable" in text and "[file.schema]" in text, text
  assert "Traceback" not in text and "AttributeError" not in text and "another exception occurred" not in text, text


def test_the_schema_ships_and_describes_the_corpus():
  """Every shipped case matches it (the loader reads them all); it ships as package data."""
  from tinyspec import spec
  from tinyspec.conformance.corpus.cases import load_cases
  assert Path(spec.path("case.schema.json")).is_file()
  broken: list = []
  assert len(load_cases(None, broken)) > 1000 and broken == []
