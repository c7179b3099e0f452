"""Reproduce one case anywhere (issues 16, 23): `tinyspec run --backend` takes any backend
(registered, cmd:COMMAND); a failing case's message ends with a one-line command,
`tinyspec run --case ... --backend ...`, that judges the case alone as the runner does
(exit 1 and the differing elements, their operands and the profile)."""
from __future__ import annotations
import json
import re
import shlex
import shutil
import sys
from pathlib import Path
import numpy as np
import pytest
from tinyspec.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "conformance" / "examples" / "python" / "backend.py"
CASE = ROOT / "conformance" / "cases" / "ADD" / "float32"


def _broken_backend(tmp_path) -> str:
  """The example backend with ADD computing a - b: a deliberately broken backend."""
  src = EXAMPLE.read_text()
  assert '"ADD": lambda s, arg: s[0] + s[1],' in src
  f = tmp_path / "broken_backend.py"
  f.write_text(src.replace('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] - s[1],'))
  shutil.copy(EXAMPLE.parent / "manifest.yaml", tmp_path)   # the manifest its hello names, beside it
  return f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(f))}"


def _inputs():
  return [a for k in ("buf0", "buf1") for a in ("--input", f"{k}={CASE / f'in.{k}.npy'}")]


def test_run_takes_a_cmd_backend(tmp_path, capsys):
  out = tmp_path / "out"
  rc = main(["run", "--backend", f"cmd:{sys.executable} {EXAMPLE}", str(CASE / "graph.json"), *_inputs(), "--out", str(out)])
  assert rc == 0, capsys.readouterr().err
  want = np.load(CASE / "out.out0.npy")
  assert np.array_equal(np.load(out / "out0.npy"), want, equal_nan=True)


def test_run_refuses_an_unknown_backend(capsys):
  assert main(["run", "--backend", "no-such-backend", str(CASE / "graph.json"), *_inputs()]) == 2
  assert "unknown backend 'no-such-backend'" in capsys.readouterr().err


def test_a_failure_prints_a_repro_command_that_judges_the_case(tmp_path, capsys):
  backend = _broken_backend(tmp_path)
  rc = main(["conformance", "--backend", backend, "-k", "ADD/float32", "--json", str(tmp_path / "r.json")])
  out = capsys.readouterr().out
  assert rc == 1, out
  fail = out[out.index("FAIL"):out.index("failing cases")]
  assert "ADD/float32" in fail and "elements differ" in fail
  assert re.search(r"operands of element \(\d+,\): buf0\[\d+\] = \S+ \(0x[0-9a-f]{8}\), buf1\[\d+\] = \S+ \(0x[0-9a-f]{8}\)", fail), fail   # the operands there, with their bits
  assert "profile: strict" in fail
  assert str(CASE.parent.parent) not in fail, fail                  # no path into the installed corpus: its id is enough
  repro = next(line for line in out.splitlines() if line.strip().startswith("repro: ")).split("repro: ", 1)[1]
  assert "repro: " in (tmp_path / "r.json").read_text()   # the JSON report carries it too
  argv = shlex.split(repro)
  assert argv == ["tinyspec", "run", "--backend", backend, "--case", "ADD/float32"]
  rc = main(argv[1:])                                      # the command judges the case alone, on the same backend
  said = capsys.readouterr().out
  assert rc == 1, said
  assert said.startswith("FAIL ADD/float32 on starter-python (profile strict): out0: ") and "elements differ" in said, said
  assert "got -1.0 (0xbf800000), expected 1.0 (0x3f800000)" in said and "operands of element" in said, said   # a - b where a + b was wanted
  assert "repro:" not in said


def test_run_case_passes_on_a_right_backend(capsys):
  assert main(["run", "--case", str(CASE), "--backend", "c"]) == 0
  assert capsys.readouterr().out.startswith("PASS ADD/float32 on c (profile strict)")
  assert main(["run", "--case", "ADD/float32", "--backend", "ref", "--profile", "portable"]) == 0   # an id in the shipped corpus
  assert "(profile portable)" in capsys.readouterr().out


def test_run_case_in_a_corpus_of_ones_own(tmp_path, capsys, monkeypatch):
  corpus = tmp_path / "corpus"
  shutil.copytree(CASE, corpus / "ADD" / "float32")
  monkeypatch.chdir(tmp_path)
  backend = _broken_backend(tmp_path)
  assert main(["conformance", "--backend", backend, "--cases", "corpus", "-k", "ADD", "--profile", "portable"]) == 1
  out = capsys.readouterr().out
  repro = shlex.split(next(line for line in out.splitlines() if "repro: " in line).split("repro: ", 1)[1])
  assert repro[3:] == [backend, "--case", "corpus/ADD/float32", "--profile", "portable"]   # relative to where one is
  assert main(repro[1:]) == 1 and "(profile portable)" in capsys.readouterr().out
  assert main(["run", "--case", "ADD/float32", "--cases", "corpus", "--backend", "ref"]) == 0


@pytest.mark.parametrize("argv, said", [
  (["--case", "ADD/flaot32"], "neither a case folder nor a case id in the shipped corpus; did you mean 'ADD/float32'"),
  (["--case", "ADD/float32", str(CASE / "graph.json")], "give FILE or --case, not both"),
  (["--case", "ADD/float32", "--input", "buf0=x.npy"], "--input: for FILE runs"),
  ([], "give the graph FILE to run"),
])
def test_run_case_usage_errors(capsys, argv, said):
  assert main(["run", "--backend", "ref", *argv]) == 2
  assert said in capsys.readouterr().err


def test_run_case_not_covered_by_the_backend_exits_5(capsys):
  caps = json.dumps({"ops": {"NEG": ["tensor"]}, "dtypes": ["float32"]})
  fake = ROOT / "tests" / "support" / "fake_backend.py"
  assert main(["run", "--case", "ADD/float32", "--backend", f"cmd:{shlex.quote(sys.executable)} {fake} caps {shlex.quote(caps)}"]) == 5
  assert "UNSUPPORTED ADD/float32" in capsys.readouterr().out


def test_run_case_says_what_the_manifest_expects(tmp_path, capsys, monkeypatch):
  backend = _broken_backend(tmp_path)
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec.manifests]\nstarter-python = "m.yaml"\n')
  (tmp_path / "m.yaml").write_text('expected_failures:\n  "ADD/*": "a - b (planted)"\n')
  monkeypatch.chdir(tmp_path)
  rc = main(["run", "--case", "ADD/float32", "--backend", backend])
  out = capsys.readouterr().out
  assert rc == 1 and "note: starter-python's manifest expects this case to fail: a - b (planted)" in out, out
