"""The GPU kernels' adversary on machines without a GPU: the programs compiled for the GPU
tables (spec/render.yaml device_tables: STAGE local tiles and their BARRIERs, tree
combines, fused row kernels, split reductions) run on the Oclgrind simulator with its
data-race, bounds, uninitialized-read and barrier-divergence checks on; any diagnostic
fails the run (rule run.oclgrind), and so does a result outside tolerance. A planted
missing BARRIER and a planted off-by-one in a local tile must be caught.
Each check runs in a child process (tests/compiler/oclgrind_child.py) with TINYSPEC_OPENCL_DEVICE=
Oclgrind: the runtime registers Oclgrind's ICD for that process only. Skipped, with the
reason, where Oclgrind is not installed (scripts/setup.sh installs it as root)."""
from __future__ import annotations
import json
import os
import subprocess
import sys
from pathlib import Path
import pytest

CHILD = Path(__file__).resolve().parent / "oclgrind_child.py"


def _oclgrind_missing() -> str | None:
  from tinyspec.compiler.runtime.opencl import oclgrind_library
  return None if oclgrind_library() else "Oclgrind is not installed (apt-get install oclgrind)"


pytestmark = pytest.mark.skipif(_oclgrind_missing() is not None, reason=str(_oclgrind_missing()))


def _child(*args, timeout=900, **extra) -> list[dict]:
  env = {**os.environ, "TINYSPEC_OPENCL_DEVICE": "Oclgrind"}
  env.pop("OCL_ICD_VENDORS", None)
  for k in ("OCLGRIND_DATA_RACES", "OCLGRIND_UNINITIALIZED", "OCLGRIND_LOG"): env.pop(k, None)   # the runtime's defaults: races, bounds, barriers; a test adds what it needs
  env.update(extra)
  p = subprocess.run([sys.executable, str(CHILD), *args], env=env, capture_output=True, text=True, timeout=timeout)
  assert p.returncode == 0, p.stderr[-3000:]
  return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


# the H100 table gets every program; the others the paths where their numbers differ
# (work-group sizes, warp 64, local memory): rows, tree combines, split reductions, gemms
@pytest.mark.parametrize("table,only", [("h100", ()), ("a100", ("3x63", "3x129", "3x300", "4097", "gemm")),
                                        ("mi250", ("3x65", "3x129", "3x258", "65537", "gemm"))])
def test_gpu_table_programs_pass_oclgrind(table, only):
  # every check on, the uninitialized-value one included: these programs copy no buffer between
  # kernels, the case where that check reports bytes a copy wrote (the runtime leaves it off there)
  rows = _child("programs", table, *only, OCLGRIND_UNINITIALIZED="1")
  assert len(rows) >= 10
  bad = [r for r in rows if not r["ok"]]
  assert not bad, "\n".join(f"{r['program']}: {r.get('error') or r.get('max_err')}" for r in bad)
  assert any(r.get("local_bytes") for r in rows if r["program"].startswith("gemm")), "no gemm staged through local memory"


@pytest.mark.parametrize("plant,finding,extra", [("barrier", "data race", {}), ("tile", "invalid write", {}),
                                                ("tile-uninit", "uninitialized", {"OCLGRIND_UNINITIALIZED": "1"})])
def test_planted_local_memory_bugs_are_caught(plant, finding, extra):
  (r,) = _child("plant", plant, **extra)
  assert r["rule"] == "run.oclgrind", r
  assert finding.lower() in r["message"].lower()
