"""The pytest plugin stays out of the way (issue 23): installed, it adds only --tinyspec-*
options and tinyspec_* ini keys, so another project's own --backend, --cases and --manifest
work; its settings come from the command line, the ini file or [tool.tinyspec]; a failure
is the runner's message without a traceback; a session in which no case ran exits 5."""
from __future__ import annotations
import json
import shlex
import subprocess
import sys
from pathlib import Path
import pytest
from test_repro import _broken_backend
from hostile import cli

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_backend.py"


def pytest_in(where: Path, *args, timeout=300) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *map(str, args)], cwd=where,
                        capture_output=True, text=True, timeout=timeout)


def corpus(*args) -> list:
  return ["--pyargs", "tinyspec.conformance", "-q", "-rA", *args]


def test_a_project_that_owns_backend_cases_and_manifest_still_works(tmp_path):
  (tmp_path / "conftest.py").write_text(
    "def pytest_addoption(parser):\n"
    "  parser.addoption('--backend', default='sqlite')\n  parser.addoption('--cases', default='all')\n"
    "  parser.addoption('--manifest', default='none')\n")
  (tmp_path / "test_db.py").write_text(
    "def test_options(request):\n"
    "  assert request.config.getoption('backend') == 'postgres'\n"
    "  assert request.config.getoption('cases') == 'all' and request.config.getoption('manifest') == 'none'\n")
  r = pytest_in(tmp_path, "--backend", "postgres")
  assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
  r = pytest_in(tmp_path, "--help")
  ours = [w for line in r.stdout.splitlines() for w in line.split() if w.startswith("--tinyspec")]
  assert ours and all(w.startswith("--tinyspec-") for w in ours)
  section = r.stdout[r.stdout.index("tinyspec conformance"):]
  section = section[:section.index("\n\n")]
  assert "--backend" not in section.replace("--tinyspec-backend", "")   # the short names are not ours


def test_settings_from_the_command_line_ini_and_pyproject(tmp_path):
  broken = _broken_backend(tmp_path)
  (tmp_path / "pyproject.toml").write_text(f"[tool.tinyspec]\nbackend = {json.dumps(broken)}\n")
  r = pytest_in(tmp_path, *corpus("--tinyspec-case", "ADD/float32", "--tinyspec-case", "ADD/int32"))
  assert r.returncode == 1 and "2 failed" in r.stdout, r.stdout[-3000:]     # [tool.tinyspec] backend: the broken one
  (tmp_path / "pytest.ini").write_text("[pytest]\ntinyspec_backend = ref\n")
  r = pytest_in(tmp_path, *corpus("--tinyspec-case", "ADD/float32"))
  assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:]     # the ini key wins over [tool.tinyspec]
  r = pytest_in(tmp_path, *corpus("--tinyspec-case", "ADD/float32", f"--tinyspec-backend={broken}"))
  assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout[-3000:]     # the command line wins over both
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec]\nbakend = "c"\n')
  r = pytest_in(tmp_path, *corpus())
  assert r.returncode == 2 and "[tool.tinyspec] has an unknown key 'bakend'; did you mean 'backend'?" in r.stdout, r.stdout[-3000:]
  assert "Traceback" not in r.stdout + r.stderr and "plugin.py" not in r.stdout


def test_an_unknown_backend_is_a_message_not_a_traceback(tmp_path):
  r = pytest_in(tmp_path, *corpus("--tinyspec-backend=nonexistent"))
  assert r.returncode == 2, r.stdout[-3000:]
  assert "tinyspec conformance: unknown backend 'nonexistent'" in r.stdout
  assert "Traceback" not in r.stdout + r.stderr and "KeyError" not in r.stdout and "plugin.py" not in r.stdout


def test_a_failure_is_the_runners_message(tmp_path):
  r = pytest_in(tmp_path, *corpus(f"--tinyspec-backend={_broken_backend(tmp_path)}", "-k", "ADD/float32 and not ATOMIC"))
  out = r.stdout
  assert r.returncode == 1 and "1 failed" in out, out[-3000:]
  assert "fail: out0: " in out and "operands of element" in out and "profile: strict" in out
  assert "repro: tinyspec run --backend" in out and "--case ADD/float32" in out
  assert "ExecCase(" not in out and "def test_case" not in out and "assert r.status" not in out   # no source, no dump


def test_manifest_marks_and_exclusions(tmp_path):
  m = tmp_path / "m.yaml"
  m.write_text('expected_failures:\n  "ADD/float32": "a - b (planted)"\nexclude:\n  "ADD/int32": "not run (planted)"\n')
  r = pytest_in(tmp_path, *corpus(f"--tinyspec-backend={_broken_backend(tmp_path)}", f"--tinyspec-manifest={m}",
                                  "--tinyspec-case", "ADD/float32", "--tinyspec-case", "ADD/int32"))
  assert r.returncode == 0 and "1 skipped, 1 xfailed" in r.stdout, r.stdout[-3000:]
  assert "excluded by the manifest: not run (planted)" in r.stdout


def test_a_session_in_which_no_case_ran_exits_5(tmp_path):
  caps = json.dumps({"ops": {"NEG": ["tensor"]}, "dtypes": ["float32"]})
  backend = f"cmd:{shlex.quote(sys.executable)} {FAKE} caps {shlex.quote(caps)}"
  r = pytest_in(tmp_path, *corpus(f"--tinyspec-backend={backend}", "--tinyspec-case", "ADD/float32", "--tinyspec-case", "MUL/int32"))
  assert r.returncode == 5 and "2 skipped" in r.stdout, r.stdout[-3000:]
  assert "none of the 2 cases ran" in r.stdout
  r = pytest_in(tmp_path, *corpus(f"--tinyspec-backend={backend}", "--tinyspec-case", "ADD/float32", "-n", "2"))
  assert r.returncode == 5, r.stdout[-3000:]                          # over pytest-xdist too


def test_collecting_starts_no_backend_and_reads_no_case(tmp_path):
  """Each pytest-xdist worker collects everything: the cases are listed by id, the backend
  starts at the first test. A backend that cannot start and a malformed case are not
  the collection's business."""
  cases = tmp_path / "cases"
  for cid in ("A/x", "B/y"):
    (cases / cid).mkdir(parents=True)
    (cases / cid / "case.json").write_text("{not json" if cid == "B/y" else json.dumps({"id": "A/renamed"}))
  r = pytest_in(tmp_path, *corpus("--tinyspec-backend=cmd:false", f"--tinyspec-cases={cases}", "--collect-only"))
  assert r.returncode == 0 and "test_case[A/renamed]" in r.stdout and "test_case[B/y]" in r.stdout, r.stdout[-3000:]


def test_a_backend_that_cannot_start_is_one_error_and_exit_2(tmp_path):
  """The first test of each pytest process says why; the others are skipped."""
  import re
  for workers in (1, 2):
    r = pytest_in(tmp_path, *corpus("--tinyspec-backend=cmd:false", "-k", "ADD/float32 or ADD/int32 or MUL/int32",
                                    *(["-n", "2"] if workers == 2 else [])))
    assert r.returncode == 2 and "backend false is not available" in r.stdout, r.stdout[-3000:]
    errors = int(re.search(r"(\d+) errors?\b", r.stdout).group(1))
    assert 1 <= errors <= workers and re.search(r"\b\d+ skipped", r.stdout), r.stdout[-3000:]
    assert "Traceback" not in r.stdout + r.stderr and "INTERNALERROR" not in r.stdout


def test_an_expected_failure_that_passes_fails_the_session(tmp_path):
  m = tmp_path / "m.yaml"
  m.write_text('expected_failures:\n  "MUL/float32": "expected to fail (it does not)"\n')
  r = pytest_in(tmp_path, *corpus(f"--tinyspec-backend={_broken_backend(tmp_path)}", f"--tinyspec-manifest={m}",
                                  "--tinyspec-case", "MUL/float32"))
  assert r.returncode == 1 and "1 failed" in r.stdout and "XPASS(strict)" in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("ini", ["pytest.ini", "pyproject.toml", "tool.tinyspec"])
def test_an_ini_backends_relative_path_is_from_the_ini_files_folder(tmp_path, ini, monkeypatch):
  """`tinyspec_backend = cmd:./backend` in pytest.ini or [tool.pytest.ini_options], and
  `backend = "cmd:./backend"` in [tool.tinyspec], name the program beside that file,
  whichever folder pytest or `tinyspec conformance` runs from; an ini backend's failure
  has a repro command naming it by its full path."""
  src = (ROOT / "conformance" / "examples" / "python" / "backend.py").read_text()
  src = src.replace('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] + s[1] + 1 if s[0].dtype == np.int32 else s[0] + s[1],')   # int32 ADD planted wrong
  (tmp_path / "backend").write_text(f"#!{sys.executable}\n" + src)
  (tmp_path / "backend").chmod(0o755)
  (tmp_path / "manifest.yaml").write_text("expected_failures: {}\nexclude: {}\n")
  key = "tinyspec_backend = cmd:./backend\n"
  text = {"pytest.ini": "[pytest]\n" + key, "pyproject.toml": '[tool.pytest.ini_options]\ntinyspec_backend = "cmd:./backend"\n',
          "tool.tinyspec": '[tool.tinyspec]\nbackend = "cmd:./backend"\n'}[ini]
  (tmp_path / ("pytest.ini" if ini == "pytest.ini" else "pyproject.toml")).write_text(text)
  (tmp_path / "tests" / "deeper").mkdir(parents=True)
  r = pytest_in(tmp_path / "tests" / "deeper", *corpus("--tinyspec-case", "ADD/float32", "--tinyspec-case", "ADD/int32"))
  out = r.stdout + r.stderr
  assert r.returncode == 1 and "1 passed" in out and "1 failed" in out and "ADD/int32] - Failed: fail" in out, out[-3000:]
  if ini == "tool.tinyspec":   # `tinyspec run` reads it too: the repro leaves the backend to it
    assert "repro: tinyspec run --case ADD/int32" in out, out[-3000:]
    monkeypatch.chdir(tmp_path / "tests" / "deeper")
    rc, said = cli("conformance", "--case", "ADD/float32", "--case", "ADD/int32")
    assert rc == 1 and "1 passed, 1 failed" in said, said
  else: assert f"--backend {shlex.quote('cmd:' + str(tmp_path / 'backend'))}" in out, out[-3000:]   # the repro runs from anywhere
