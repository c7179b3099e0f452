"""The cluster bar of issue 34: a real `dask scheduler` and two `dask worker --nworkers 1`
processes from this venv on 127.0.0.1; `tinyspec fuzz --backend c --sanitize` on them, with
one worker killed (SIGKILL) 25 s into the run, prints the same "examples per family" and
"N examples, M failures" lines as the same command with --jobs 1.

  .venv/bin/python bench/cluster_bar.py                    # --examples 200 --seed 0 --kill-after 25
  .venv/bin/python bench/cluster_bar.py --examples 40 --kill-after 10

Exit 0 when the lines match and the killed worker was running a unit, 1 when not. Every
process it starts is ended by its id when it stops.
"""
from __future__ import annotations
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from distributed import Client

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LINES = (re.compile(r"^examples per family: .*$", re.M), re.compile(r"^\d+ examples, \d+ failures", re.M))


def compared(text: str) -> list[str]:
  """The lines the bar compares (the second without its time)."""
  return [m.group(0) if m else "(missing)" for m in (p.search(text) for p in LINES)]


def fuzz(args: list[str], out: Path, env: dict) -> subprocess.Popen:
  cmd = [str(BIN / "tinyspec"), "fuzz", "--backend", "c", "--sanitize", *args, "--out", str(out), "--progress"]
  return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(out.parent))


def start_cluster(tmp: Path, env: dict) -> tuple[str, list]:
  """A scheduler and two workers; (the scheduler's address, the processes)."""
  sfile = tmp / "scheduler.json"
  procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                             "--scheduler-file", str(sfile)], stdout=subprocess.DEVNULL, stderr=open(tmp / "scheduler.log", "w"),
                            env=env, start_new_session=True)]
  for _ in range(300):
    if sfile.exists() and sfile.stat().st_size: break
    time.sleep(0.1)
  address = json.loads(sfile.read_text())["address"]
  for k in range(2):
    procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1", "--host", "127.0.0.1",
                                   "--no-dashboard", "--name", f"w{k}"], stdout=subprocess.DEVNULL,
                                  stderr=open(tmp / f"worker{k}.log", "w"), env=env, start_new_session=True))
  with Client(address, timeout=60) as c: c.wait_for_workers(2, timeout=120)
  return address, procs


def kill_a_busy_worker(address: str) -> str:
  """SIGKILL the process of a worker that is running a unit now; what was killed."""
  with Client(address, timeout=30) as c:
    busy = [w for w, keys in c.processing().items() if keys]
    if not busy: return "nothing (no worker was running a unit)"
    w = busy[0]
    pid = c.run(os.getpid, workers=[w])[w]
    units = c.processing()[w]
  os.kill(pid, signal.SIGKILL)
  return f"worker {w} (pid {pid}) while it held {', '.join(str(u) for u in units)}"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--examples", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--kill-after", type=float, default=25.0)
  a = ap.parse_args(argv)
  env = {**os.environ, "TINYSPEC_CACHE": os.environ.get("TINYSPEC_CACHE", str(ROOT / ".cache" / "tinyspec"))}
  env.pop("TINYSPEC_SCHEDULER", None)
  tmp = Path(tempfile.mkdtemp(prefix="tinyspec-cluster-bar-"))
  common = ["--examples", str(a.examples), "--seed", str(a.seed)]
  t0 = time.monotonic()
  one = fuzz([*common, "--jobs", "1"], tmp / "one", env)
  out1, err1 = one.communicate()
  t_one = time.monotonic() - t0
  address, procs = start_cluster(tmp, env)
  try:
    t0 = time.monotonic()
    run = fuzz([*common, "--scheduler", address], tmp / "cluster", env)
    time.sleep(a.kill_after)
    killed = kill_a_busy_worker(address) if run.poll() is None else "nothing (the run had ended)"
    out2, err2 = run.communicate()
    t_cluster = time.monotonic() - t0
  finally:
    for p in reversed(procs):
      try: os.killpg(p.pid, signal.SIGTERM)
      except ProcessLookupError: pass
    for p in procs:
      try: p.wait(20)
      except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL)
  want, got = compared(out1), compared(out2)
  print(f"--jobs 1 ({t_one:.0f} s, exit {one.returncode}):")
  for line in want: print(f"  {line}")
  print(f"--scheduler {address}, 2 workers, killed at {a.kill_after:g} s: {killed} ({t_cluster:.0f} s, exit {run.returncode}):")
  for line in got: print(f"  {line}")
  ok = want == got and "(missing)" not in want and killed.startswith("worker") and one.returncode == run.returncode
  if not ok: print("stderr of the cluster run:\n" + err2[-3000:])
  print("the same lines" if ok else "NOT the same lines (or no worker was killed mid-unit)")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
