"""The conformance runner against hostile case folders and backends (issue 13): nothing
blocks it past --timeout, SIGINT/SIGTERM end its backends' process groups and print what
ran, tampered cases are caught by their sha256 pins, ids and backend text reach the
terminal and JUnit escaped, and every malformed thing a backend says is a clear error."""
from __future__ import annotations
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
import numpy as np
import pytest
from hostile import cli, console, assert_refused, FAKE, ROOT

CASES = ROOT / "conformance" / "cases"
EXAMPLE = ROOT / "conformance" / "examples" / "python" / "backend.py"


def copy_case(dst: Path, name: str = "NEG/float32", **meta) -> Path:
  """A corpus case copied into dst (its id and other fields changed by `meta`)."""
  f = dst / name
  shutil.copytree(CASES / name, f)
  if meta:
    m = json.loads((f / "case.json").read_text()); m.update(meta)
    (f / "case.json").write_text(json.dumps(m))
  return f


# ------------------------------------------------------------------ case folders
@pytest.mark.parametrize("which", ["case.json", "graph.json", "out.out0.npy", "in.buf0.npy"])
def test_a_fifo_in_a_case_folder_blocks_nothing(tmp_path, which):
  f = copy_case(tmp_path / "cases")
  (f / which).unlink(); os.mkfifo(f / which)
  t0 = time.monotonic()
  r = console("conformance", "--backend", "ref", "--cases", tmp_path / "cases", "--timeout", "10", timeout=120)
  assert time.monotonic() - t0 < 60
  assert r.returncode == 1 and ("not a regular file" in r.stdout + r.stderr or "case.pin" in r.stdout), r.stdout + r.stderr
  r = console("conformance", "--backend", "ref", "--cases", tmp_path / "cases", "--timeout", "10", "--no-verify", timeout=120)
  assert r.returncode == 1 and "1 error" in r.stdout + r.stderr or "failed" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("content", ["[1, 2]", "[" * 100000 + "]" * 100000, '{"format": "tinyspec-case", "kind": "positive", "graph": 5}',
                                     '{"format": "tinyspec-case", "kind": "positive", "graph": "g", "inputs": {"buf0": {"file": 1}}}', "\x00"],
                         ids=["list", "100k-deep", "graph-number", "input-file-number", "nul"])
def test_a_malformed_case_json_is_that_cases_error(tmp_path, content):
  copy_case(tmp_path / "cases")
  bad = tmp_path / "cases" / "BAD"; bad.mkdir()
  (bad / "case.json").write_text(content)
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "cases")
  assert rc == 1 and "ERROR" in text and "BAD" in text and "1 passed" in text, text


def test_a_tampered_case_is_caught_by_its_pin(tmp_path):
  f = copy_case(tmp_path / "cases")
  want = np.load(f / "out.out0.npy"); np.save(f / "out.out0.npy", np.zeros_like(want))   # an expected value changed
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "cases")
  assert rc == 1 and "[case.pin]" in text and "0 passed" in text and "1 error" in text, text
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "cases", "--no-verify")
  assert rc == 1 and "FAIL" in text and "case.pin" not in text, text   # run, and judged against the changed value
  from tinyspec.conformance.corpus.cases import load_cases, verify
  assert all(verify(c) is None for c in load_cases())   # the shipped corpus matches its pins


def test_the_pytest_plugin_checks_pins_too(tmp_path):
  from tinyspec.conformance.run.execute import CaseRunner
  from tinyspec.conformance.corpus.cases import load_cases
  f = copy_case(tmp_path / "cases")
  (f / "in.buf0.npy").write_bytes((f / "in.buf0.npy").read_bytes()[:-1] + b"\x01")
  r = CaseRunner("ref")
  try: res = r.run_one(load_cases(tmp_path / "cases")[0])
  finally: r.close()
  assert res.status == "error" and "case.pin" in res.message


# ------------------------------------------------------------------ what reaches the terminal and JUnit
HOSTILE_ID = "\x1b[2J\x1b[H999 passed, 0 failed\n]]></x>\x07"


def test_case_ids_and_backend_text_are_escaped(tmp_path):
  copy_case(tmp_path / "cases", id=HOSTILE_ID)
  junit = tmp_path / "j.xml"
  r = console("conformance", "--backend", f"cmd:{sys.executable} {FAKE} stderr-crash", "--cases", tmp_path / "cases", "--junit", junit)
  out = r.stdout + r.stderr
  assert r.returncode == 1 and "\x1b" not in out and "\x07" not in out, repr(out)
  assert "\\x1b[2J" in out
  import re
  summary = [line for line in r.stdout.splitlines() if re.match(r"\d+ passed, ", line)]
  assert summary == ["0 passed, 0 failed, 1 error"], r.stdout   # the forged "999 passed" never starts a line
  root = ET.parse(junit).getroot()                                # parses: real XML
  case = root.find("testsuite/testcase")
  assert "\\x1b[2J" in case.get("classname") + case.get("name") and case.find("error") is not None


def test_junit_is_well_formed_for_any_text():
  from tinyspec.conformance.run.report import junit_xml
  from tinyspec.conformance.run.runner import Result
  nasty = "".join(chr(c) for c in range(0, 0x250)) + "\ud800\U0001F600]]>&<'\""
  xml = junit_xml([Result(nasty, nasty, s, nasty) for s in ("fail", "error", "skip", "xfail", "pass")], nasty)
  root = ET.fromstring(xml)
  assert len(root.findall("testsuite/testcase")) == 5 and root.find("testsuite/testcase/failure").get("message")


# ------------------------------------------------------------------ backends that misbehave
@pytest.mark.parametrize("caps", ['{"ops": [1, 2]}', '{"ops": {"NEG": 5}}', '[1]', '{"dtypes": "float32"}', '{"validates": "yes"}'])
def test_malformed_capabilities(caps):
  assert_refused(["conformance", "--backend", f"cmd:{sys.executable} {FAKE} caps {json.dumps(caps)}", "-k", "NEG/float32"],
                 "backend.protocol", 2, "capabilities")


def test_a_line_without_a_newline_is_not_buffered_whole(tmp_path):
  """A backend writing more than limits.max_line_bytes without a newline fails its case at
  once as a protocol error (it was buffered up to 2 GiB, then the case timed out)."""
  from tinyspec.limits import limits
  n = limits().max_line_bytes + (1 << 20)
  t0 = time.monotonic()
  rc, text = cli("conformance", "--backend", f"cmd:{sys.executable} {FAKE} long-line {n}", "-k", "NEG/float32", "--timeout", "60")
  assert rc == 1 and "[backend.protocol]" in text and "limits.max_line_bytes" in text, text
  assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("content", ["- a\n- b\n", "expected_failures: [a, b]\n", "expected_failures: {a: 5}\n", "[[[[" * 1000, "\x00\x01"])
def test_a_malformed_manifest(tmp_path, content):
  m = tmp_path / "m.yaml"; m.write_text(content)
  assert_refused(["conformance", "--backend", "ref", "-k", "NEG/float32", "--manifest", m], "file.schema" if "\x00" not in content and "[[[[" not in content else "file.parse", 2)


def test_fuzz_against_the_shipped_example_backend(tmp_path):
  backend = f"cmd:{sys.executable} {EXAMPLE}"
  rc, text = cli("fuzz", "--backend", backend, "--examples", "10", "--out", tmp_path / "f")
  assert rc == 0 and "10 examples, 0 failures" in text, text   # --level both draws what the backend runs (tensor)
  rc, text = cli("fuzz", "--backend", backend, "--examples", "10", "--level", "kernel", "--out", tmp_path / "f")
  assert rc == 2 and "runs no op" in text, text


def test_describe_a_0d_output():
  from tinyspec.conformance.run.compare import describe
  assert describe(np.float32(1), np.float32(2), "float32") == "1 of 1 elements differ; at (): got 1.0 (0x3f800000), expected 2.0 (0x40000000), 8388608 ulp apart (bit-exact)"
  assert describe(np.array(3, np.int32), np.array(3, np.int32), "int32") is None


# ------------------------------------------------------------------ interrupted runs
def _start_slow_run(tmp_path, pidfile):
  cmd = [sys.executable, "-c", "import sys; from tinyspec.cli import main; sys.exit(main())", "conformance",
         "--backend", f"cmd:{sys.executable} {FAKE} slow {pidfile}", "-k", "NEG/*", "--timeout", "300", "--workers", "2"]
  p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # (a test run started in the background ignores SIGINT; children inherit it)
  for _ in range(600):
    if pidfile.exists() and pidfile.read_text().strip(): break
    time.sleep(0.1)
  else:
    p.kill(); raise AssertionError("the backend never ran: " + p.communicate()[1])
  return p


def _alive(pid: int) -> bool:
  try: os.kill(pid, 0)
  except ProcessLookupError: return False
  try:   # a zombie is dead
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
  except OSError: return False


@pytest.mark.parametrize("sig,code,name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_an_interrupted_run_ends_its_backends_and_says_what_ran(tmp_path, sig, code, name):
  pidfile = tmp_path / "pids"
  p = _start_slow_run(tmp_path, pidfile)
  pids = [int(x) for x in pidfile.read_text().split()]
  p.send_signal(sig)
  out, err = p.communicate(timeout=60)
  assert p.returncode == code, (p.returncode, out, err)
  assert f"interrupted by {name}" in err and "passed" in out, out + err
  assert "Traceback" not in out + err and "AttributeError" not in out + err and "ERROR" not in out, out + err
  time.sleep(0.5)
  assert not any(_alive(pid) for pid in pids), pids   # the backend and the process it started


# ------------------------------------------------------------------ time
@pytest.mark.parametrize("argv", [["eval"], ["run", "--backend", "c"]], ids=["eval", "run-c"])
def test_a_long_evaluation_stops_at_its_timeout(tmp_path, argv):
  """An EXPAND to (2^20, 2^20) and a REDUCE: 2^40 float additions. Stopped by --timeout
  (exit 1, run.timeout), in Python code or, from native code, by the watchdog."""
  nodes = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}, {"op": "VCONST", "arg": {"values": [1, 1], "dtype": "index"}},
           {"op": "RESHAPE", "src": [0, 1]}, {"op": "VCONST", "arg": {"values": [1 << 20, 1 << 20], "dtype": "index"}},
           {"op": "EXPAND", "src": [2, 3]}, {"op": "REDUCE", "src": [4], "arg": {"op": "ADD", "axes": [0, 1]}}]
  g = tmp_path / "g.json"; g.write_text(json.dumps(nodes))
  t0 = time.monotonic()
  r = console(argv[0], g, *argv[1:], "--timeout", "2", timeout=120)
  assert r.returncode == 1 and "[run.timeout]" in r.stderr, r.stdout + r.stderr
  assert time.monotonic() - t0 < 40


def test_a_long_evaluation_stops_in_process(tmp_path):
  """In this process (no watchdog): the large reduction goes block by block, so the time
  limit stops it between blocks."""
  nodes = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}, {"op": "VCONST", "arg": {"values": [1, 1], "dtype": "index"}},
           {"op": "RESHAPE", "src": [0, 1]}, {"op": "VCONST", "arg": {"values": [1 << 20, 1 << 20], "dtype": "index"}},
           {"op": "EXPAND", "src": [2, 3]}, {"op": "REDUCE", "src": [4], "arg": {"op": "MAX", "axes": [0, 1]}}]
  g = tmp_path / "g.json"; g.write_text(json.dumps(nodes))
  t0 = time.monotonic()
  assert_refused(["eval", g, "--timeout", "2"], "run.timeout", 1)
  assert time.monotonic() - t0 < 20


def test_padto_1e12_stops_at_its_timeout(tmp_path):
  g = tmp_path / "g.json"
  g.write_text(json.dumps([{"op": "VCONST", "arg": {"values": [2], "dtype": "index"}},
                           {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}}, {"op": "NEG", "src": [1]}]))
  r = console("compile", g, "--opt", '[["PADTO", 0, 1000000000000]]', "--build", "--timeout", "60", timeout=120)
  assert r.returncode == 0, r.stderr
  t0 = time.monotonic()
  code = ("import sys, numpy as np; from tinyspec.graph import Graph; from tinyspec.compiler import compile_graph; from tinyspec import deadline\n"
          f"g = Graph.load({str(g)!r})\n"
          "with deadline.time_limit(2, hard=True): compile_graph(g, 'c', [['PADTO', 0, 10**12]]).run({'buf0': np.ones(2, np.float32)})\n")
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert p.returncode == 1 and "[run.timeout]" in p.stderr, p.stderr
  assert time.monotonic() - t0 < 40


def test_validate_and_compile_have_a_time_limit(tmp_path, monkeypatch):
  chain = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}] + [{"op": "NEG", "src": [i]} for i in range(300_000)]
  g = tmp_path / "chain.json"; g.write_text(json.dumps(chain))
  t0 = time.monotonic()
  r = console("compile", g, "--timeout", "1", timeout=120)
  assert r.returncode == 1 and "[run.timeout]" in r.stderr, r.stdout[-500:] + r.stderr
  assert time.monotonic() - t0 < 30
  from tinyspec import limits
  monkeypatch.setattr(limits.limits(), "timeout", 0.2)   # the default, when --timeout is not given
  assert_refused(["validate", g], "run.timeout", 1, "stopped after 0.2 s")
