"""The case runner (conformance/run/execute.py) and `tinyspec conformance --backend`: crash
isolation (a segfault, an abort and a hang each fail their own case and the run goes on),
manifests (expected failures, strict: an unexpected pass fails the run), JUnit/JSON and
coverage output, the progress lines, the external example backend, and the pytest plugin."""
from __future__ import annotations
import json
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
import pytest
from tinyspec.cli import main
from tinyspec.conformance.corpus.cases import load_cases
from tinyspec.conformance.run.execute import CaseRunner, coverage
from tinyspec.conformance.corpus.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
PICK = ["ADD/int32", "MUL/int32", "MAX/int32", "SUB/int32", "negative/RESHAPE.numel/invalid-6-to-2x4"]


def cli(capsys, *argv):
  rc = main([str(a) for a in argv])
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err
  return rc, out.out, out.err


@pytest.fixture(scope="module")
def crashing(tmp_path_factory):
  """An external backend (the protocol, served by the reference evaluator) that segfaults
  on graphs with MUL, aborts on MAX and hangs on SUB."""
  d = tmp_path_factory.mktemp("crashing")
  p = d / "crashing_backend.py"
  p.write_text(textwrap.dedent("""\
    import json, os, signal, sys, time
    from tinyspec.refimpl.backend import RefBackend
    from tinyspec.conformance.run.worker import handle_run
    b = RefBackend()
    for line in sys.stdin:
      msg = json.loads(line)
      if msg["cmd"] == "hello":
        ans = {"ok": True, "protocol": 1, "name": "crashing", "capabilities": b.capabilities().to_json()}
      elif msg["cmd"] == "run":
        ops = {n["op"] for n in json.load(open(msg["graph"]))["nodes"]}
        if "MUL" in ops: os.kill(os.getpid(), signal.SIGSEGV)
        if "MAX" in ops: os.abort()
        if "SUB" in ops: time.sleep(60)
        ans = handle_run(b, msg)
      else: break
      print(json.dumps(ans), flush=True)
    """))
  return f"cmd:{sys.executable} {p}"


def test_crashes_and_hangs_fail_their_case_and_the_run_goes_on(crashing, capsys):
  cases = [c for c in load_cases() if c.id in PICK]
  r = CaseRunner(crashing, timeout=3, batch=1)
  res = {x.case: x for x in r.run(cases)}
  assert res["ADD/int32"].status == "pass" and res["negative/RESHAPE.numel/invalid-6-to-2x4"].status == "pass"
  assert res["MUL/int32"].status == "error" and "SIGSEGV" in res["MUL/int32"].message
  assert res["MAX/int32"].status == "error" and "SIGABRT" in res["MAX/int32"].message
  assert res["SUB/int32"].status == "error" and "timeout" in res["SUB/int32"].message


def test_the_cli_reports_a_crash_as_that_cases_error(crashing, capsys):
  rc, out, _ = cli(capsys, "conformance", "--backend", crashing, "--timeout", "3", "-k", "MUL/int32", "--workers", "2")
  assert rc == 1 and out.count(": crash: the backend killed by SIGSEGV") == 1, out   # the same message for both: said once
  assert out.strip().splitlines()[-1].startswith("0 passed, 0 failed, 2 errors")   # MUL/int32 and MUL/int32-narrowed (no -broadcast: a glob would be needed)
  closing = out[out.index("failing cases (2):"):]
  assert re.search(r"ERROR crashing MUL/int32(-narrowed)? and 1 more with the same message \(shown above once\): MUL/int32", closing), closing
  assert "rerun them: tinyspec conformance --backend" in closing and "--case MUL/int32 --case MUL/int32-narrowed" in closing


def test_manifest_expected_failures_are_strict(crashing, tmp_path, capsys):
  m = tmp_path / "m.yaml"
  m.write_text('expected_failures:\n  "MUL/int32": "segfaults on purpose"\n  "ADD/int32": "listed, but it passes"\n')
  rc, out, _ = cli(capsys, "conformance", "--backend", crashing, "--manifest", m, "-k", "ADD/int32", "--timeout", "3")
  assert "XPASS crashing ADD/int32: passed, but the manifest expects a failure: listed, but it passes" in out
  assert rc == 1                                                          # an unexpected pass is unexpected
  m.write_text('expected_failures:\n  "MUL/int32*": "segfaults on purpose"\n')
  rc, out, _ = cli(capsys, "conformance", "--backend", crashing, "--manifest", m, "-k", "MUL/int32", "--timeout", "3")
  assert rc == 0 and out.strip().splitlines()[-1] == "0 passed, 0 failed, 2 expected failures"   # MUL/int32, MUL/int32-narrowed
  m.write_text('expected_failures:\n  "MUL/int32": ""\n')
  assert cli(capsys, "conformance", "--backend", crashing, "--manifest", m, "-k", "MUL/int32")[0] == 2   # every entry needs a reason


def test_shipped_manifests_are_well_formed_and_match_cases():
  ids = [c.id for c in load_cases()]
  for p in (ROOT / "conformance" / "manifests").glob("*.yaml"):
    man = load_manifest(path=p)   # an empty manifest is the goal (the c backend's is); a listed entry must match a case
    assert isinstance(man.expected_failures, dict) and not man.unused(ids), (p.name, man.unused(ids))
    assert all(isinstance(r, str) and r.strip() for r in man.expected_failures.values()), p.name


def test_reports_junit_json_and_coverage(tmp_path, capsys):
  cov = tmp_path / "cov.json"
  cov.write_text(json.dumps({"other": {"ADD": {"int8": "passed"}}}))
  rc, out, err = cli(capsys, "conformance", "--backend", "ref", "-k", "ADD/int", "-k", "*/int8*", "--junit", tmp_path / "j.xml",
                     "--json", tmp_path / "r.json", "--coverage", cov, "--progress", "--workers", "2")
  assert rc == 0
  n = int(out.strip().splitlines()[-1].split()[0])
  suites = ET.parse(tmp_path / "j.xml").getroot()
  assert [s.get("name") for s in suites] == ["ref"] and int(suites[0].get("tests")) == n and suites[0].get("failures") == "0"
  rep = json.loads((tmp_path / "r.json").read_text())
  assert rep["summary"]["pass"] == n and len(rep["results"]) == n
  data = json.loads(cov.read_text())
  assert data["other"] == {"ADD": {"int8": "passed"}} and data["ref"]["ADD"]["int8"] == "passed"   # merged, other backends kept
  assert "ref: " in err and f"{n}/{n} done, 0 unexpected" in err                                # plain progress lines (not a tty)


def test_coverage_ranks_failures_over_passes():
  from tinyspec.conformance.run.runner import Result
  cases = [c for c in load_cases() if c.id in ("ADD/int8", "ADD/int8-broadcast", "ADD/int16", "WMMA/float32")]
  res = [Result("ADD/int8", "x", "pass"), Result("ADD/int8-broadcast", "x", "fail"), Result("ADD/int16", "x", "xfail"),
         Result("WMMA/float32", "x", "unsupported")]
  assert coverage(cases, res) == {"ADD": {"int8": "failed", "int16": "xfail"}, "WMMA": {"float32": "unsupported"}}


def test_unsupported_cases_are_not_run(capsys):
  rc, out, _ = cli(capsys, "conformance", "--backend", "c", "-k", "WMMA/float32", "-v")
  assert rc == 5 and "UNSUPPORTED c WMMA/float32: needs op WMMA at kernel level" in out   # and no case ran: exit 5


def test_the_example_backend_passes_with_its_manifest(capsys):
  ex = ROOT / "conformance" / "examples" / "python" / "backend.py"
  rc, out, _ = cli(capsys, "conformance", "--backend", f"cmd:{sys.executable} {ex}", "-k", "/float32")
  last = out.strip().splitlines()[-1]
  assert rc == 0 and "unsupported" in last and " 0 failed" in last and "unexpected" not in last   # its manifest is empty: MAX follows max-nan


def test_usage_errors_exit_2(capsys, tmp_path):
  assert cli(capsys, "conformance", "--backend", "no-such-backend")[0] == 2
  assert cli(capsys, "conformance", "--backend", "ref", "--cases", tmp_path / "nowhere")[0] == 2
  assert cli(capsys, "conformance", "--backend", "ref", "-k", "no-such-case")[0] == 5   # nothing selected: no case ran (pytest's exit 5)
  assert cli(capsys, "conformance", "--backend", f"cmd:{tmp_path / 'missing-program'}", "-k", "ADD/int8")[0] == 2


def test_batched_and_single_runs_agree():
  cases = [c for c in load_cases() if c.id.startswith(("CMPLT/", "CAST/int8", "PERMUTE/", "REDUCE/float32")) and "float8" not in c.id and not c.id.endswith("-untyped")]   # (c types no float8)
  one = {r.case: r.status for r in CaseRunner("c", batch=1).run(cases)}
  many = {r.case: r.status for r in CaseRunner("c", batch=16).run(cases)}
  assert one == many and set(one.values()) == {"pass"}


def test_pytest_plugin_runs_the_corpus():
  r = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-backend=ref", "-k", "RESHAPE or negative/PERMUTE",
                      "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  assert " passed" in r.stdout and "failed" not in r.stdout


@pytest.mark.parametrize("text, said", [("expected_failure:\n  'ADD/*': why\n", "unknown key 'expected_failure'; did you mean 'expected_failures'?"),
                                        ("expected-failures: {}\n", "unknown key 'expected-failures'; did you mean 'expected_failures'?"),
                                        ("expected_failures: {}\nbackend: c\n", "unknown key 'backend' (a manifest holds only expected_failures, exclude)")])
def test_a_manifest_with_an_unknown_key_is_refused(tmp_path, capsys, text, said):
  m = tmp_path / "m.yaml"
  m.write_text(text)
  rc, _, err = cli(capsys, "conformance", "--backend", "ref", "--manifest", str(m), "-k", "ADD/int32")
  assert rc == 2 and said in err and "[file.schema]" in err
