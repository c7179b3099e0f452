"""Reproduce one case anywhere (issue 16): `tinyspec run --backend` takes any backend
(registered, cmd:COMMAND); a failing case's message names its folder and a one-line
command that runs it alone, and that command runs."""
from __future__ import annotations
import shlex
import sys
from pathlib import Path
import numpy as np
from tinyspec.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "conformance" / "examples" / "numpy_backend.py"
CASE = ROOT / "conformance" / "cases" / "ADD" / "float32"


def _broken_backend(tmp_path) -> str:
  """The example backend with ADD computing a - b: a deliberately broken backend."""
  src = EXAMPLE.read_text()
  assert '"ADD": lambda s, arg: s[0] + s[1],' in src
  f = tmp_path / "broken_backend.py"
  f.write_text(src.replace('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] - s[1],'))
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


def test_a_failure_names_its_case_folder_and_a_command_that_reproduces_it(tmp_path, capsys):
  backend = _broken_backend(tmp_path)
  rc = main(["conformance", "--backend", backend, "-k", "ADD/float32",
             "--json", str(tmp_path / "r.json")])
  out = capsys.readouterr().out
  assert rc == 1, out
  fail = next(line for line in out.splitlines() if line.startswith("FAIL"))
  assert "ADD/float32" in fail
  case = next(line for line in out.splitlines() if line.strip().startswith("case: "))
  assert Path(case.split("case: ", 1)[1]) == CASE
  repro = next(line for line in out.splitlines() if line.strip().startswith("repro: ")).split("repro: ", 1)[1]
  assert "repro: " in (tmp_path / "r.json").read_text()   # the JSON report carries it too
  argv = shlex.split(repro)
  assert argv[:4] == ["tinyspec", "run", "--backend", backend]
  assert main(argv[1:] + ["--out", str(tmp_path / "got")]) == 0   # the command runs the case alone, on the same backend
  got, want = np.load(tmp_path / "got" / "out0.npy"), np.load(CASE / "out.out0.npy")
  assert not np.array_equal(got, want, equal_nan=True)    # and shows the same wrong values


def test_k_can_exclude(capsys):
  from tinyspec.conformance.runner import select
  class C:
    def __init__(self, i): self.id = i
  ids = [c.id for c in select([C("IDIV/int32"), C("ADD/int32"), C("ADD/float32")], ["int32", "not IDIV"])]
  assert ids == ["ADD/int32"]
  assert main(["conformance", "--backend", "ref", "-k", "IDIV/", "-k", "not IDIV", "--list"]) == 2   # nothing left: said so
  assert main(["conformance", "--backend", "ref", "-k", "ADD/", "-k", "not float", "--list"]) == 0
  listed = capsys.readouterr().out.split()
  assert listed and all("ADD/" in x and "float" not in x for x in listed)
