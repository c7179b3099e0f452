"""`tinyspec fuzz --sanitize`: the sanitizer fuzzer finds a planted bug of each class of
issue 12 within the CI slice's examples (conformance/sanitize.py CI_EXAMPLES, CI_SEED;
scripts/test.sh runs that slice), and reports nothing on the compiler as it is. The
plants (tests/plants/sitecustomize.py) go into the fuzzer's child only, through
PYTHONPATH and $TINYSPEC_PLANT; the reference stays the oracle.
"""
from __future__ import annotations
import subprocess
import sys
from pathlib import Path
import pytest
from tinyspec.conformance import sanitize

ROOT = Path(__file__).resolve().parent.parent
PLANTS = ROOT / "tests" / "plants"
needs_sanitizers = pytest.mark.skipif(sanitize.unavailable() is not None, reason=str(sanitize.unavailable()))


@needs_sanitizers
@pytest.mark.parametrize("plant", ["literal", "gate-wrap", "sizes", "parallel", "call-const", "call-const-buffer"])
def test_a_planted_bug_is_found_within_the_ci_slice(plant, tmp_path):
  rep = sanitize.fuzz_sanitized(sanitize.CI_EXAMPLES, sanitize.CI_SEED, tmp_path, stop_at_first=True, shrink=False,
                                extra_env={"PYTHONPATH": str(PLANTS), "TINYSPEC_PLANT": plant})
  assert rep.failures, f"the planted {plant} bug survived {rep.examples} examples"
  assert sum(rep.drawn.values()) <= sanitize.CI_EXAMPLES
  assert rep.written and (rep.written[0] / "case.json").is_file()


@needs_sanitizers
def test_the_compiler_passes_a_short_run(tmp_path):
  r = subprocess.run([sys.executable, "-m", "tinyspec.cli", "fuzz", "--backend", "c", "--sanitize", "--examples", "25", "--seed", "7",
                      "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=tmp_path)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
  assert "25 examples, 0 failures" in r.stdout


def test_sanitize_needs_the_c_backend(tmp_path):
  r = subprocess.run([sys.executable, "-m", "tinyspec.cli", "fuzz", "--backend", "opencl", "--sanitize", "--examples", "1"],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path)
  assert r.returncode == 2 and "--backend c" in r.stderr
  r = subprocess.run([sys.executable, "-m", "tinyspec.cli", "fuzz", "--backend", "c", "--sanitize", "--families", "nope"],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path)
  assert r.returncode == 2 and "unknown families" in r.stderr


def test_ci_runs_the_slice():
  text = (ROOT / "scripts" / "test.sh").read_text()
  assert f"--examples {sanitize.CI_EXAMPLES} --seed {sanitize.CI_SEED}" in text
