"""A backend author's sharp edges (issue 32): `tinyspec case new|pin`, `run --compare ref`,
`run --case --out`, `run` with the project's backend, a backend of [tool.tinyspec] relative
to its pyproject.toml, `--manifest none`, `--list` marking what would not run, counts in
their number, the profile line in words, pasteable pytest node ids, and `run --case` on a
case whose expected output is not a .npy file (an ERROR with its rule id, no traceback)."""
from __future__ import annotations
import json
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hostile import cli, ROOT

CASES = ROOT / "conformance" / "cases"
STARTER = ROOT / "conformance" / "examples" / "python"


def starter(folder: Path, broken: bool = False) -> str:
  """The Python starter in folder (ADD computing a - b when broken), as a cmd: backend."""
  folder.mkdir(parents=True, exist_ok=True)
  src = (STARTER / "backend.py").read_text()
  if broken: src = src.replace('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] - s[1],')
  (folder / "backend.py").write_text(src)
  shutil.copy(STARTER / "manifest.yaml", folder)
  return f"cmd:{sys.executable} {folder / 'backend.py'}"


# ------------------------------------------------------------------ tinyspec case new | pin
def test_case_new_makes_a_pinned_case_the_runner_judges(tmp_path):
  g = CASES / "ADD" / "float32" / "graph.json"
  np.save(tmp_path / "x.npy", np.load(CASES / "ADD" / "float32" / "in.buf0.npy"))
  rc, text = cli("case", "new", g, tmp_path / "mine" / "ADD" / "f32", "--input", f"buf0={tmp_path / 'x.npy'}")
  assert rc == 0 and "buf1: not given, filled with the edge values" in text and "sha256" in text, text
  meta = json.loads((tmp_path / "mine" / "ADD" / "f32" / "case.json").read_text())
  assert "id" not in meta and meta["generator"]["tool"] == "tinyspec case new" and len(meta["sha256"]) == 64
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "mine")
  assert rc == 0 and "1 passed" in text, text
  rc, text = cli("conformance", "--backend", starter(tmp_path / "b", broken=True), "--cases", tmp_path / "mine", "-k", "ADD/f32")
  assert rc == 1 and "elements differ" in text, text                             # its id is its folder below the corpus
  rc, text = cli("case", "new", g, tmp_path / "mine" / "ADD" / "f32")
  assert rc == 2 and "holds a case already" in text, text


def test_a_changed_case_is_refused_saying_how_to_pin_it_and_case_pin_pins_it(tmp_path):
  shutil.copytree(CASES / "NEG" / "float32", tmp_path / "c" / "NEG" / "float32")
  f = tmp_path / "c" / "NEG" / "float32"
  np.save(f / "in.buf0.npy", np.zeros_like(np.load(f / "in.buf0.npy")))   # changed on purpose: the expected output is stale too
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "c")
  assert rc == 1 and "--no-verify" in text and "tinyspec case pin" in text and "[case.pin]" in text, text
  rc, text = cli("case", "pin", f)
  assert rc == 0 and "(was " in text, text
  rc, text = cli("case", "pin", f)
  assert rc == 0 and "(unchanged)" in text, text
  rc, text = cli("conformance", "--backend", "ref", "--cases", tmp_path / "c")
  assert rc == 1 and "elements differ" in text, text                              # pinned: it runs, and its stale output shows
  rc, text = cli("case", "pin", tmp_path / "nowhere")
  assert rc == 2 and "nowhere" in text, text


@pytest.mark.parametrize("graph, argv, code, said", [
  ("ADD/float32/graph.json", ["--input", "buf9=X"], 2, "no input 'buf9' (its inputs: buf0, buf1) [eval.input]"),
  ("ADD/float32/graph.json", ["--input", "buf0=NOFILE"], 2, "[file.read]"),
  ("ADD/float32/graph.json", ["--input", "buf0=WIDE"], 2, "[eval.input]"),                 # float64 for a float32 buffer
  ("../rules/dtype.match/invalid-int32-plus-float32.json", [], 1, "[dtype.match]"),
])
def test_case_new_refuses_what_cannot_be_a_case(tmp_path, graph, argv, code, said):
  np.save(tmp_path / "X", np.zeros(529, np.float32))
  np.save(tmp_path / "WIDE", np.zeros(529, np.float64))
  argv = [a.replace("=X", f"={tmp_path / 'X.npy'}").replace("NOFILE", str(tmp_path / "none.npy")).replace("WIDE", str(tmp_path / "WIDE.npy"))
          for a in argv]
  rc, text = cli("case", "new", CASES / graph, tmp_path / "new", *argv)
  assert rc == code and said in text, text
  assert not (tmp_path / "new" / "case.json").exists()


# ------------------------------------------------------------------ tinyspec run
def test_run_compares_a_file_with_the_reference(tmp_path):
  d = CASES / "ADD" / "float32"
  ins = [a for k in ("buf0", "buf1") for a in ("--input", f"{k}={d / f'in.{k}.npy'}")]
  rc, text = cli("run", d / "graph.json", "--backend", starter(tmp_path / "ok"), *ins, "--compare", "ref")
  assert rc == 0 and text.startswith(f"PASS {d / 'graph.json'} on starter-python"), text
  rc, text = cli("run", d / "graph.json", "--backend", starter(tmp_path / "bad", broken=True), *ins, "--compare", "ref", "--out", tmp_path / "o")
  assert rc == 1 and "FAIL" in text and "elements differ" in text and "operands of element" in text, text
  got = np.load(tmp_path / "o" / "out0.npy")   # the backend's own outputs, as it gave them
  with np.errstate(all="ignore"): assert np.array_equal(got, np.load(d / "in.buf0.npy") - np.load(d / "in.buf1.npy"), equal_nan=True)
  rc, text = cli("run", d / "graph.json", "--backend", "c", "--input", f"buf0={d / 'in.buf0.npy'}", "--compare", "ref")
  assert rc == 2 and "'buf1' is not given" in text, text


def test_run_case_takes_out(tmp_path):
  rc, text = cli("run", "--case", "ADD/int8", "--backend", starter(tmp_path / "b"), "--out", tmp_path / "o")
  assert rc == 0 and "wrote" in text, text
  assert np.load(tmp_path / "o" / "out0.npy").tobytes() == np.load(CASES / "ADD" / "int8" / "out.out0.npy").tobytes()


def test_run_case_on_an_expected_output_that_is_not_npy_is_an_error_with_its_rule(tmp_path):
  f = tmp_path / "ADD" / "float32"
  shutil.copytree(CASES / "ADD" / "float32", f)
  (f / "out.out0.npy").write_text("not an array\n")
  assert cli("case", "pin", f)[0] == 0   # a hand-made case, pinned as it is: only reading it as an array refuses it
  for argv in (["run", "--case", f], ["conformance", "--cases", tmp_path]):
    rc, text = cli(*argv, "--backend", "ref")
    assert rc == 1 and "ERROR" in text and "[file." in text and "out.out0.npy" in text, text   # (cli: no traceback)


def test_run_and_eval_print_outputs_alike(tmp_path):
  d = CASES / "ADD" / "int8"
  ins = [a for k in ("buf0", "buf1") for a in ("--input", f"{k}={d / f'in.{k}.npy'}")]
  _, ran = cli("run", d / "graph.json", *ins)
  _, evaluated = cli("eval", d / "graph.json", *ins)
  assert ran == evaluated and ran.startswith("out0: int8 [")


def test_the_projects_backend_is_relative_to_its_pyproject_and_run_reads_it(tmp_path, monkeypatch):
  starter(tmp_path / "proj", broken=True)
  (tmp_path / "proj" / "pyproject.toml").write_text(f'[tool.tinyspec]\nbackend = "cmd:{sys.executable} backend.py"\n')
  (tmp_path / "proj" / "tests").mkdir()
  monkeypatch.chdir(tmp_path / "proj" / "tests")
  rc, text = cli("conformance", "--case", "ADD/float32")
  assert rc == 1 and "starter-python" in text and "elements differ" in text, text
  repro = next(line for line in text.splitlines() if "repro: " in line).split("repro: ", 1)[1]
  assert repro == "tinyspec run --case ADD/float32", repro   # the project names the backend: pasteable here
  rc, text = cli(*repro.split()[1:])
  assert rc == 1 and "FAIL ADD/float32 on starter-python" in text and "(from [tool.tinyspec]" in text, text
  rc, text = cli("run", "--case", "ADD/float32", "--backend", "ref")   # the command line wins
  assert rc == 0 and "on ref" in text, text


# ------------------------------------------------------------------ conformance's words
@pytest.mark.parametrize("none", ["none", "/dev/null"])
def test_manifest_none_runs_without_one(tmp_path, none):
  backend = starter(tmp_path, broken=True)
  (tmp_path / "manifest.yaml").write_text('expected_failures:\n  "ADD/float32": "planted"\n')
  rc, text = cli("conformance", "--backend", backend, "--case", "ADD/float32")
  assert rc == 0 and "1 expected failure" in text and "1 expected failures" not in text, text
  rc, text = cli("conformance", "--backend", backend, "--case", "ADD/float32", "--manifest", none)
  assert rc == 1 and "0 passed, 1 failed" in text, text


def test_list_marks_the_cases_that_would_not_run(tmp_path):
  backend = starter(tmp_path)
  (tmp_path / "manifest.yaml").write_text('expected_failures:\n  "ADD/int8": "planted"\nexclude:\n  "ADD/float64": "slow"\n')
  rc, text = cli("conformance", "--backend", backend, "-k", "ADD/float or ADD/int8 or ATOMICADD/int8", "--list")
  lines = dict(line.split("  ", 1) if "  " in line else (line, "") for line in text.splitlines())
  assert rc == 0 and lines["ADD/float32"] == "" and lines["ADD/float64"] == "(starter-python: excluded by its manifest: slow)", text
  assert lines["ADD/int8"] == "(starter-python: expected to fail: planted)" and "unsupported, needs op ATOMICADD" in lines["ATOMICADD/int8"]


def test_counts_are_in_their_number_and_the_profile_line_says_what_it_means():
  from tinyspec.conformance.run.runner import Result, profile_line, summary_line, counts
  one = [Result("a", "b", s) for s in ("error", "xfail", "xpass")]
  assert summary_line(counts(one)) == "0 passed, 0 failed, 1 error, 1 expected failure, 1 unexpected pass"
  assert "2 errors" in summary_line(counts(one + [Result("c", "b", "error")]))
  neither = profile_line([Result("a", "b", "fail", profiles={"strict": "fail", "portable": "fail"})])
  assert neither == ("profile: meets neither strict nor portable: 1 case gives a result that is neither the canonical one "
                     "nor any other the spec allows")
  portable = profile_line([Result("a", "b", "pass", profiles={"strict": "fail", "portable": "pass"})] * 2)
  assert "meets portable; not strict (2 cases give an allowed result other than the canonical one)" in portable


def test_allow_untrusted_is_explained():
  for cmd in ("eval", "run", "compile"):
    _, text = cli(cmd, "--help")
    assert "--allow-untrusted" in text and "CUSTOM" in text and "opaque" in text, (cmd, text)


def test_pytest_prints_node_ids_that_paste_back(tmp_path):
  """A failing corpus test under --pyargs is said in a form pytest takes back, and it runs exactly that case."""
  backend = starter(tmp_path / "b", broken=True)
  base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", f"--tinyspec-backend={backend}"]
  r = subprocess.run(base + ["--pyargs", "tinyspec.conformance", "-k", "ADD/float32 or ADD/float64"], capture_output=True, text=True,
                     cwd=tmp_path, timeout=300)
  lines = [x.strip() for x in r.stdout.splitlines() if x.strip().startswith("pytest --pyargs ")]
  assert r.returncode == 1 and len(lines) == 2, r.stdout[-3000:]
  import shlex
  again = subprocess.run(base + shlex.split(lines[0])[1:], capture_output=True, text=True, cwd=tmp_path, timeout=300)
  assert again.returncode == 1 and "1 failed" in again.stdout and "passed" not in again.stdout, again.stdout[-2000:]
