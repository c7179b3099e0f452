"""The TINYSPEC_* variables (tinyspec/environment.py) and the option values of issue 21's
item 8: a value a variable or option cannot mean is a clear error with a rule id and
exit 2 (or the refusal's exit 1 for OptOps), never a traceback; the README's spellings of
the device tables work. tests/support/cli_fuzz.py draws every variable and option with hostile
values."""
from __future__ import annotations
import re
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hostile import cli
from tinyspec import environment
from tinyspec.tensor import Tensor

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_lists_every_variable():
  table = (ROOT / "README.md").read_text().split("## Environment", 1)[1].split("\n## ", 1)[0]
  assert set(re.findall(r"^\| `(TINYSPEC_\w+)` \|", table, re.M)) == set(environment.VARIABLES)


@pytest.fixture
def gemm_file(tmp_path):
  t = Tensor(np.ones((13, 64), np.float32)).reshape(13, 64, 1) * Tensor(np.ones((64, 64), np.float32)).reshape(1, 64, 64)
  f = tmp_path / "g.json"
  t.sum(1).graph().save(f)
  return f


@pytest.mark.parametrize("var,value", [("TINYSPEC_BEAM", "1e9"), ("TINYSPEC_BEAM", "-1"), ("TINYSPEC_BEAM", "9" * 30),
                                       ("TINYSPEC_THREADS", "two"), ("TINYSPEC_THREADS", "0"), ("TINYSPEC_THREADS", "100000"),
                                       ("TINYSPEC_SLICE_ORDER", "up"), ("TINYSPEC_SCHEDULER", "not a host; rm -rf /"), ("TINYSPEC_EVAL_BUDGET", "lots"), ("TINYSPEC_EVAL_BUDGET", "-5G"),
                                       ("TINYSPEC_OPENCL_DEVICE", "table:nope"), ("TINYSPEC_OPENCL_DEVICE", "table:")])
@pytest.mark.parametrize("command", ["compile", "validate"])
def test_a_value_a_variable_cannot_mean_is_refused(var, value, command, gemm_file, monkeypatch):
  monkeypatch.setenv(var, value)
  rc, text = cli(command, gemm_file, *(["--target", "opencl"] if command == "compile" else []))
  assert rc == 2 and "[env.value]" in text and var in text, text


@pytest.mark.parametrize("name", ["h100", "H100", "mi250x", "MI250X", "mi250", "A100"])
def test_device_tables_answer_to_the_readmes_spellings(name, gemm_file, monkeypatch):
  from tinyspec.compiler import device as D
  assert D.table_device(name).kind == "gpu"
  monkeypatch.setenv("TINYSPEC_OPENCL_DEVICE", f"table:{name}")
  D.device.cache_clear()
  try:
    rc, text = cli("compile", gemm_file, "--target", "opencl")
    assert rc == 0 and "__kernel" in text, text      # the gemm of item 7 (13 rows: prime) compiles for the table too
  finally:
    D.device.cache_clear()


def test_a_negative_seed_draws_graphs(tmp_path):
  rc, text = cli("fuzz", "--backend", "ref", "--examples", "2", "--seed", "-5", "--out", tmp_path / "f")
  assert rc == 0 and "2 examples, 0 failures" in text and "seed -5" in text, text


@pytest.mark.parametrize("opt,rule", [("[[]]", "opt.unsupported"), ('[[["PADTO"]]]', "opt.unsupported"), ("[null]", "opt.unsupported"),
                                      ('[["PADTO", 0, 99999999999999999999999]]', "opt.divisible"),
                                      ('[["PADTO", 0, 1099511627777]]', "opt.divisible"), ('[["PADTO", 0, true]]', "opt.divisible")])
def test_optops_that_mean_nothing_are_refused(opt, rule, gemm_file):
  rc, text = cli("compile", gemm_file, "--opt", opt)
  assert rc == 1 and f"[{rule}]" in text, text


def test_the_pytest_plugin_refuses_an_unknown_backend(tmp_path):
  r = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-backend=nonexistent", "-q", "-p", "no:cacheprovider"],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path)
  out = r.stdout + r.stderr
  assert r.returncode == 2 and "unknown backend 'nonexistent'" in out, out    # the collection refused, before any test
  assert "Traceback" not in out and "KeyError" not in out and "plugin.py" not in out, out


@pytest.mark.parametrize("flags", ["-fsanitize=address", "-fsanitize=thread", "-fsanitize=address,undefined", "--no-such-flag"])
def test_cflags_that_cannot_build_or_load_are_a_clear_error(flags, gemm_file, monkeypatch, tmp_path):
  """A sanitizer whose runtime this process has not preloaded (loading its library would
  end the process, or fail) and a flag the compiler refuses: exit 1, the reason said."""
  monkeypatch.setenv("TINYSPEC_CFLAGS", flags)
  monkeypatch.setenv("TINYSPEC_CACHE", str(tmp_path / "cache"))
  rc, text = cli("run", gemm_file, "--backend", "c")
  assert rc == 1 and "BuildError" in text, text
  if "sanitize" in flags: assert "LD_PRELOAD" in text


@pytest.mark.parametrize("argv", [["docs", "--out", "x" * 300], ["docs", "--check", "--out", "x" * 300], ["run", "G", "--backend", "x" * 300],
                                  ["conformance", "--backend", "ref", "--cases", "x" * 300]])
def test_names_too_long_for_the_file_system_are_clear_errors(argv, gemm_file, tmp_path, monkeypatch):
  """Found by the CLI fuzz's option kind: a path the file system cannot hold (ENAMETOOLONG)."""
  monkeypatch.chdir(tmp_path)
  rc, text = cli(*[str(gemm_file) if a == "G" else a for a in argv])
  assert rc in (1, 2), text


def test_a_budget_too_small_for_the_reference_ends_the_fuzz_clearly(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYSPEC_EVAL_BUDGET", "1")
  rc, text = cli("fuzz", "--backend", "ref", "--examples", "2", "--out", tmp_path / "f")
  assert rc == 1 and "[eval.budget]" in text, text
