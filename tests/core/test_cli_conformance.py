"""`tinyspec conformance`: the rule corpus through the validator, the summary line, exit
codes, -k, --cases, --json, and backends that fail or crash."""
from __future__ import annotations
import json
import shutil
from tinyspec.cli import main
from tinyspec.conformance.run import runner
from tinyspec.conformance.corpus.rulecases import RULES_DIR, load_rule_cases


def cli(capsys, *argv):
  rc = main([str(a) for a in argv])
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err
  return rc, out.out, out.err


def test_the_whole_corpus_passes(capsys):
  n = len(load_rule_cases())
  rc, out, _ = cli(capsys, "conformance")
  assert rc == 0 and out.strip().splitlines()[-1] == f"{n} passed, 0 failed"


def test_select_with_k_and_write_json(capsys, tmp_path):
  rc, out, _ = cli(capsys, "conformance", "-k", "RESHAPE.numel", "-v", "--json", tmp_path / "r.json")
  lines = out.strip().splitlines()
  assert rc == 0 and lines[-1] == "2 passed, 0 failed"
  assert lines[:2] == ["PASS  validator RESHAPE.numel/invalid-6-to-2x4", "PASS  validator RESHAPE.numel/valid-6-to-2x3-and-empty"]
  rep = json.loads((tmp_path / "r.json").read_text())
  assert rep["summary"] == {"pass": 2, "fail": 0, "error": 0, "skip": 0, "xfail": 0, "xpass": 0, "unsupported": 0}
  assert [r["case"] for r in rep["results"]] == ["RESHAPE.numel/invalid-6-to-2x4", "RESHAPE.numel/valid-6-to-2x3-and-empty"]
  rc, out, _ = cli(capsys, "conformance", "-k", "ops/*", "-k", "*ADD*", "--list")
  assert rc == 0 and out.split() == ["ops/ADD/valid-example", "ops/ATOMICADD/valid-example"]


def test_a_wrong_expectation_fails(capsys, tmp_path):
  cases = tmp_path / "rules"
  shutil.copytree(RULES_DIR / "RESHAPE.numel", cases / "RESHAPE.numel")
  e = cases / "RESHAPE.numel" / "invalid-6-to-2x4.expect.json"
  d = json.loads(e.read_text()); d["expect"]["node"] = 0; e.write_text(json.dumps(d))
  rc, out, _ = cli(capsys, "conformance", "--cases", cases)
  assert rc == 1 and "FAIL  validator RESHAPE.numel/invalid-6-to-2x4: expected rule RESHAPE.numel at node 0, got it at node(s) ['3']" in out
  assert out.strip().splitlines()[-1] == "1 passed, 1 failed"


def test_corpus_and_usage_errors_exit_2(capsys, tmp_path):
  assert cli(capsys, "conformance", "--cases", tmp_path / "nowhere")[0] == 2
  (tmp_path / "bad.expect.json").write_text("{not json")
  rc, _, err = cli(capsys, "conformance", "--cases", tmp_path)
  assert rc == 2 and "bad.expect.json: not a valid case description" in err
  assert cli(capsys, "conformance", "-k", "no-such-case")[0] == 5   # nothing selected: no case ran (pytest's exit 5)
  assert cli(capsys, "conformance", "--backend", "no-such-backend")[0] == 2


class _Crashing(runner.Backend):
  name = "crashing"
  def supports(self, case): return case.valid
  def run(self, case): raise RuntimeError("boom")


def test_a_crashing_backend_is_an_error_result_not_a_traceback(capsys, monkeypatch):
  monkeypatch.setitem(runner.BACKENDS, "crashing", _Crashing)
  rc, out, _ = cli(capsys, "conformance", "--backend", "crashing", "-k", "RESHAPE.numel")
  assert rc == 1 and "ERROR crashing RESHAPE.numel/valid-6-to-2x3-and-empty: RuntimeError: boom" in out
  assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 1 error, 1 skipped"
