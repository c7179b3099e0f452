"""Searches on Dask (conformance/cluster.py): examples per second of the sanitizer fuzz and
of the tinygrad campaign on 1 and 2 local workers and on a 2-worker cluster of real
`dask scheduler` / `dask worker` processes on 127.0.0.1, and the overhead per unit.

  .venv/bin/python bench/bench_cluster.py                         # everything (a few minutes)
  .venv/bin/python bench/bench_cluster.py --only overhead --units 400

The overhead: `--units` units that do nothing (tests/support/cluster_units.py sleepy_unit
with 0 s) through run_units, with the findings database, on the 2-worker cluster: wall
time per unit, and that times the workers (what one worker waits per unit). A unit of
T seconds on W workers keeps the overhead under 5% while one worker's wait per unit is
under 5% of T and the scheduler (one process, all units go through it) is busy less than
5% of the time: W * (time the scheduler spends per unit) / T < 5%. The figure measured per
unit bounds the scheduler's share from above (it includes the client and the workers), so
T_min(100 workers) = 100 * per_unit / 0.05 is a safe bound; the units' real lengths are
printed beside it. Run it on a quiet machine: it measures wall time.
"""
from __future__ import annotations
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from tinyspec.conformance.fuzz import sanitize
from tinyspec.conformance.fuzz.hostile import FAMILIES
from tinyspec.interop.tinygrad_backend import TinygradBackend
from tinyspec.interop.campaign_units import plan
from tinyspec.conformance.cluster import Unit
from tinyspec.conformance.fuzz.units import run_units

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from cluster_units import RealCluster, sleepy_unit  # noqa: E402 (tests/support, on the path above)


def sanitizer(examples: int, **where) -> tuple[float, int, float]:
  """(examples per second, examples, seconds per unit on average)."""
  t0 = time.perf_counter()
  rep = sanitize.fuzz_sanitized(examples, 0, None, shrink=True, **where)
  dt = time.perf_counter() - t0
  return rep.examples / dt, rep.examples, _unit_seconds(len(sanitize.plan(examples, 0, FAMILIES)), dt, where)


def campaign(examples: int, devices, **where) -> tuple[float, int, float]:
  """(graphs per second, graphs and programs, seconds per unit on average) of a campaign
  bounded by `examples` graphs per device."""
  out = Path(tempfile.mkdtemp(prefix="tinyspec-bench-campaign-"))
  t0 = time.perf_counter()
  rep = TinygradBackend(devices[0]).campaign(600, devices, out, 0, lambda m: None, examples=examples, **where)
  dt = time.perf_counter() - t0
  return rep.examples / dt, rep.examples + rep.programs, _unit_seconds(len(list(plan(devices, 0, examples))), dt, where)


def _unit_seconds(units: int, seconds: float, where: dict) -> float:
  workers = where.get("jobs") or 2
  return seconds * workers / max(units, 1)


def overhead(address: str, units: int) -> tuple[float, float]:
  """(ms of wall time per unit, ms one worker waits per unit) for units that do nothing."""
  tmp = Path(tempfile.mkdtemp(prefix="tinyspec-bench-overhead-"))
  (tmp / "marks").mkdir()
  plan = [Unit("bench", "noop", k, 1, k) for k in range(units)]
  run_units(plan[:20], sleepy_unit, (0.0, str(tmp / "marks")), "warm", tmp / "db.sqlite", address)   # (workers import the function)
  t0 = time.perf_counter()
  run_units(plan, sleepy_unit, (0.0, str(tmp / "marks")), "bench", tmp / "db.sqlite", address)
  dt = time.perf_counter() - t0
  return 1000 * dt / units, 1000 * dt * 2 / units


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--examples", type=int, default=90, help="sanitizer examples per run (default 90: 10 per family)")
  ap.add_argument("--campaign-examples", type=int, default=12, help="campaign graphs per device (default 12)")
  ap.add_argument("--devices", default="PYTHON,CPU", help="campaign devices (default PYTHON,CPU)")
  ap.add_argument("--units", type=int, default=300, help="no-op units for the overhead (default 300)")
  ap.add_argument("--only", choices=["sanitize", "campaign", "overhead"], default=None)
  a = ap.parse_args(argv)
  os.environ.setdefault("TINYSPEC_CACHE", str(ROOT / ".cache" / "tinyspec"))
  devices = a.devices.split(",")
  rc = RealCluster(Path(tempfile.mkdtemp(prefix="tinyspec-bench-cluster-")), 2)
  try:
    places = [("1 local worker", {"jobs": 1}), ("2 local workers", {"jobs": 2}), ("2-worker localhost cluster", {"scheduler": rc.address})]
    if a.only in (None, "sanitize"):
      for name, where in places:
        rate, n, unit = sanitizer(a.examples, **where)
        print(f"sanitizer fuzz, {name}: {rate:.2f} examples/s ({n} examples; {unit:.1f} s per unit)", flush=True)
    if a.only in (None, "campaign"):
      for name, where in places:
        rate, n, unit = campaign(a.campaign_examples, devices, **where)
        print(f"tinygrad campaign on {','.join(devices)}, {name}: {rate:.2f} graphs/s ({n} graphs and programs; {unit:.1f} s per unit)",
              flush=True)
    if a.only in (None, "overhead"):
      per_unit, per_worker = overhead(rc.address, a.units)
      print(f"overhead on the 2-worker localhost cluster: {per_unit:.1f} ms per unit ({per_worker:.1f} ms per unit per worker), "
            f"{a.units} no-op units with the findings database")
      print(f"units for < 5% at 100 workers: at least {100 * per_unit / 0.05 / 1000:.1f} s each (100 x {per_unit:.1f} ms / 5%)")
  finally:
    rc.stop()
  return 0


if __name__ == "__main__":
  sys.exit(main())
