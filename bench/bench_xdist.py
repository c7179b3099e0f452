"""The pytest plugin (conformance/plugin.py) alone and under pytest-xdist `-n N`, side by side,
on fast backends (ref; c with a warm program cache: a program taken from the cache and
loaded per case) and a slow one (c-cold: c with an empty program cache each run, a C
compiler run per case), and `tinyspec conformance --workers N` beside them: wall time and
CPU seconds (this process's children: pytest, its xdist workers, the backends, the
compilers), and the ratios of `-n N` (`--workers N`) to alone.

  .venv/bin/python bench/bench_xdist.py                     # ref, c, c-cold; the whole corpus, 2 rounds (~20 min on 2 busy cores)
  .venv/bin/python bench/bench_xdist.py --backends ref --rounds 1 -k "ADD or MUL"

The runs alternate (alone, -n N, alone, ...) so that a machine whose load changes meets
each the same. For c the cache is warmed first (`tinyspec conformance --backend c --batch 1`:
the programs the plugin runs, one per case). Bytecode caching is said: where
PYTHONDONTWRITEBYTECODE is set every process compiles tinyspec's modules (and pytest
rewrites them) again, a fixed cost per process that -n N pays per worker.
"""
from __future__ import annotations
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float, str]:
  """(wall seconds, CPU seconds of the command and everything it waited for, its last line)."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.perf_counter()
  r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
  wall = time.perf_counter() - t0
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
  last = (r.stdout.strip().splitlines() or ["?"])[-1]
  if r.returncode not in (0, 1): raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
  return wall, cpu, last


def pytest_cmd(backend: str, workers: int, k: str | None) -> list[str]:
  cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--pyargs", "tinyspec.conformance", f"--tinyspec-backend={backend}"]
  return cmd + (["-k", k] if k else []) + (["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"])


def conformance_cmd(backend: str, workers: int, k: str | None, batch: int | None = None) -> list[str]:
  return ([PY, "-m", "tinyspec", "conformance", "--backend", backend, "--workers", str(workers)] + (["-k", k] if k else [])
          + (["--batch", str(batch)] if batch else []))


def environment(name: str) -> dict:
  """The environment of a run of backend `name` (c-cold: c with a program cache of its own, empty)."""
  if name != "c-cold": return dict(os.environ)
  return {**os.environ, "TINYSPEC_CACHE": tempfile.mkdtemp(prefix="tinyspec-cold-cache-")}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--backends", default="ref,c,c-cold")
  ap.add_argument("--workers", type=int, default=2, help="N of -n N and --workers N (default 2)")
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("-k", default=None, help="a case selection (default: the whole corpus)")
  ap.add_argument("--no-cli", action="store_true", help="leave out tinyspec conformance --workers")
  a = ap.parse_args()
  work = Path(os.environ.get("TMPDIR", "/tmp"))   # (outside the project: no pytest.ini, no conftest)
  print(f"bytecode caching: {'off (PYTHONDONTWRITEBYTECODE)' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'on'}; "
        f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs")
  for name in a.backends.split(","):
    backend = "c" if name == "c-cold" else name
    if name == "c": timed(conformance_cmd("c", 1, a.k, batch=1), work)   # the C cache warmed with the plugin's programs
    kinds = [("pytest", 1), ("pytest", a.workers)] + ([] if a.no_cli else [("cli", 1), ("cli", a.workers)])
    seen: dict = {k: [] for k in kinds}
    for _ in range(a.rounds):
      for kind, n in kinds:
        cmd = pytest_cmd(backend, n, a.k) if kind == "pytest" else conformance_cmd(backend, n, a.k)
        env = environment(name)
        try: wall, cpu, last = timed(cmd, work, env)
        finally:
          if name == "c-cold": shutil.rmtree(env["TINYSPEC_CACHE"], ignore_errors=True)
        seen[(kind, n)].append((wall, cpu))
        print(f"  {name:6s} {kind:6s} {'-n' if kind == 'pytest' else '--workers'} {n}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s  ({last})", flush=True)
    for kind in ("pytest", "cli"):
      if (kind, 1) not in seen: continue
      one, many = seen[(kind, 1)], seen[(kind, a.workers)]
      w1, c1 = sum(x[0] for x in one) / len(one), sum(x[1] for x in one) / len(one)
      wn, cn = sum(x[0] for x in many) / len(many), sum(x[1] for x in many) / len(many)
      what = "pytest -n" if kind == "pytest" else "conformance --workers"
      print(f"{name}: {what} {a.workers} / alone: wall {wn / w1:.2f} ({wn:.1f} / {w1:.1f} s), CPU {cn / c1:.2f} ({cn:.1f} / {c1:.1f} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
