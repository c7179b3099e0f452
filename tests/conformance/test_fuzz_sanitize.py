"""`tinyspec fuzz --sanitize`: the sanitizer fuzzer finds a planted bug of each class of
issues 12, 21, 24 and 32 within the CI slice's examples (conformance/fuzz/sanitize.py CI_EXAMPLES,
CI_SEED; scripts/test.sh runs that slice), and reports nothing on the compiler as it is.
The plants (tests/support/plants/sitecustomize.py) go into the fuzzer's child only, through
PYTHONPATH and $TINYSPEC_PLANT; the reference stays the oracle. Each family of the slice
is a search of its own (sanitize.shares): a plant is hunted by its family alone, with the
share and the seed that family has in the slice, which draws the slice's examples of it.
"""
from __future__ import annotations
import subprocess
import sys
from pathlib import Path
import pytest
from tinyspec.conformance.fuzz import sanitize

ROOT = Path(__file__).resolve().parents[2]
PLANTS = ROOT / "tests" / "support" / "plants"
needs_sanitizers = pytest.mark.skipif(sanitize.unavailable() is not None, reason=str(sanitize.unavailable()))


PLANT_FAMILY = {"literal": "chain", "gate-wrap": "gated", "sizes": "sizes", "parallel": "axes", "call-const": "sizes",
                "call-const-buffer": "sizes", "pad-partial": "padded", "pad-gather": "gather", "contract": "contract",
                "contract-guard": "contract", "scan-tail": "contract", "scan-int": "contract", "alias": "alias", "view-store": "alias"}


@needs_sanitizers
@pytest.mark.parametrize("plant", sorted(PLANT_FAMILY))
def test_a_planted_bug_is_found_within_the_ci_slice(plant, tmp_path):
  from tinyspec.conformance.fuzz.hostile import FAMILIES
  fam = PLANT_FAMILY[plant]
  share = sanitize.shares(sanitize.CI_EXAMPLES, FAMILIES)[fam]
  rep = sanitize.fuzz_sanitized(share, sanitize.CI_SEED, tmp_path, families=[fam], stop_at_first=True, shrink=False,
                                extra_env={"PYTHONPATH": str(PLANTS), "TINYSPEC_PLANT": plant})
  assert rep.failures, f"the planted {plant} bug survived the {rep.examples} examples of family {fam} in the CI slice"
  assert sum(rep.drawn.values()) <= share
  assert rep.written and (rep.written[0] / "case.json").is_file()


def test_every_family_is_registered_and_listed():
  """FAMILIES (whose order seeds each family's search) names every family of the registry, and only those."""
  from tinyspec.conformance.fuzz import hostile
  assert sorted(hostile.FAMILIES) == hostile.FAMILY.names()


def test_a_family_alone_draws_what_it_draws_in_the_slice():
  """The equivalence the plant hunts rest on: a family's examples depend on its share and
  seed only (hostile.examples of one family, seeded by its place in FAMILIES)."""
  from hypothesis import given, settings, seed as hseed, HealthCheck, Phase
  from tinyspec.conformance.fuzz import hostile
  def drawn(fam, n):
    got = []
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @hseed(sanitize.CI_SEED + 1009 * hostile.FAMILIES.index(fam))
    @given(hostile.examples((fam,)))
    def prop(ex): got.append(ex.graph.dumps())
    prop()
    return got
  assert drawn("padded", 5) == drawn("padded", 5) and drawn("alias", 3) == drawn("alias", 3)
  assert set(sanitize.shares(sanitize.CI_EXAMPLES, hostile.FAMILIES).values()) <= {sanitize.CI_EXAMPLES // len(hostile.FAMILIES),
                                                                                     sanitize.CI_EXAMPLES // len(hostile.FAMILIES) + 1}


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
