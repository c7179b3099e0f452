"""Races on local memory in the GPU tables' reductions, hunted at every work-group size
from 1 to 300 (tests/compiler/gpu_reductions.py: row sums, fused row kernels, split sums):
compiler/analysis/localrace.py on every program of every table, and, where the Oclgrind simulator
opens (TINYSPEC_OPENCL_DEVICE=Oclgrind), the programs run there with its race detector
on, their outputs exact. A tree combine that runs a one-item step on every work item
(the race of work-groups of 2^k + 1 items) is planted and must be found by both."""
from __future__ import annotations
import json
import os
import subprocess
import sys
from pathlib import Path
import pytest
import gpu_reductions as G

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", G.KINDS)
@pytest.mark.parametrize("table", G.TABLES)
def test_every_work_group_size_is_race_free(table, kind):
  grouped = 0
  for g in G.SIZES:
    c, _, _ = G.program(kind, g, table)
    assert G.races(c) == [], (kind, g)
    sizes = G.group_items(c)
    assert not sizes or sizes[0] == g, (kind, g, sizes)        # the work-group asked for
    grouped += bool(sizes)
  assert grouped >= len(G.SIZES) - 1     # (a split needs 2 lanes at least: its group of 1 is no group)


def test_localrace_finds_a_one_item_tree_step(monkeypatch):
  """The planted combine races exactly at 2^k + 1 items, in every kind and table; a step
  outside every lane range, run by every work item, writes one element from all of them."""
  from tinyspec.compiler.passes import accumulate as A
  monkeypatch.setattr(A, "_tree_combine", G.planted_tree_combine(A._tree_combine))
  for table in G.TABLES:
    for kind in G.KINDS:
      for g in (3, 5, 9, 17, 33, 65, 129, 257, 4, 128, 300):
        c, _, _ = G.program(kind, g, table)
        found = G.races(c)
        odd = g > 2 and (g - 1) & (g - 2) == 0
        assert bool(found) == odd, (table, kind, g, found)
        if odd: assert "a write and a write" in found[0]


CHILD = r'''
import json, sys
import numpy as np
import gpu_reductions as G
from tinyspec.compiler import CompileError
from tinyspec.compiler.runtime.opencl import device
try: name = device()[2].name
except Exception as e: name = f"none ({type(e).__name__}: {e})"
if "oclgrind" not in name.lower(): print(json.dumps({"unavailable": name})); sys.exit(0)
kinds, sizes = sys.argv[1].split(","), [int(s) for s in sys.argv[2].split(",")]
if sys.argv[3] == "plant":
  from tinyspec.compiler.passes import accumulate as A
  A._tree_combine = G.planted_tree_combine(A._tree_combine)
ran, wrong, seen = 0, [], set()
for kind in kinds:
  for g in sizes:
    for table in G.TABLES:     # (the tables' programs are the same at every size: each distinct one runs once)
      c, inputs, want = G.program(kind, g, table)
      if c.source() in seen: continue
      seen.add(c.source())
      print(f"== {kind} {g} {table}", file=sys.stderr, flush=True)
      try: got = np.asarray(c.run(inputs)["out0"]).reshape(np.shape(want["out0"]))
      except CompileError as e:     # run.oclgrind: Oclgrind reported the run (its report on stderr, under the program)
        if e.rule != "run.oclgrind": raise
        print(e, file=sys.stderr); ran += 1; wrong.append([kind, g, table]); continue
      ran += 1
      if not np.array_equal(got, want["out0"]): wrong.append([kind, g, table])
print(json.dumps({"ran": ran, "wrong": wrong}))
'''


def _oclgrind(kinds, sizes, plant: bool = False):
  env = dict(os.environ, TINYSPEC_OPENCL_DEVICE="Oclgrind", OCLGRIND_DATA_RACES="1",
             PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "compiler"), str(ROOT / "tests" / "support"), str(ROOT)]))
  r = subprocess.run([sys.executable, "-c", CHILD, ",".join(kinds), ",".join(map(str, sizes)), "plant" if plant else "-"],
                     env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
  assert r.returncode == 0, r.stderr[-4000:]
  out = json.loads(r.stdout.strip().splitlines()[-1])
  if "unavailable" in out: pytest.skip(f"Oclgrind does not open as an OpenCL device (TINYSPEC_OPENCL_DEVICE=Oclgrind: {out['unavailable']})")
  return out, r.stderr


def _race_reports(stderr: str) -> list[str]:
  """The programs (the '== kind g table' line before it) under which Oclgrind reported an error."""
  out, cur = [], None
  for line in stderr.splitlines():
    if line.startswith("== "): cur = line[3:]
    elif ("data race" in line or "Invalid" in line) and cur not in out: out.append(cur)
  return out


@pytest.mark.parametrize("kind", G.KINDS)
def test_every_work_group_size_runs_race_free_on_oclgrind(kind):
  out, err = _oclgrind([kind], G.SIZES)
  assert out["ran"] >= len(G.SIZES) and out["wrong"] == [], out
  assert _race_reports(err) == [], err[-4000:]


def test_oclgrind_finds_the_planted_one_item_step():
  out, err = _oclgrind(["fused"], [129, 128], plant=True)
  assert _race_reports(err) == ["fused 129 h100"], err[-3000:]
  assert out["wrong"] == [["fused", 129, "h100"]]
