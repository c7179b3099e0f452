"""Helpers of tests/conformance/test_cluster.py: a unit function cheap enough for the
cluster's own tests (importable by real `dask worker` processes through PYTHONPATH), and a
real scheduler with workers on 127.0.0.1 from this venv."""
from __future__ import annotations
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def sleepy_unit(unit, examples: dict, seconds: float, marks: str) -> dict:
  """A unit that takes `seconds`, leaves a mark per start in the folder `marks` (so a test
  sees a unit run twice) and finds one planted bug in every third unit."""
  from tinyspec.conformance.cluster import worker_name
  Path(marks, f"{unit.key}.{os.getpid()}.{time.monotonic_ns()}").write_text("")
  time.sleep(seconds)
  found = [{"signature": json.dumps(["planted", unit.index // 3]), "op": "ADD", "dtype_class": "float", "device": unit.name,
            "kind": "value", "text": f"planted bug {unit.index // 3}", "repro": "{}"}] if unit.index % 3 == 0 else []
  return {"examples": unit.share, "findings": found, "worker": worker_name(), "saved": [], "seed": unit.seed}


def starts(marks: Path) -> dict:
  """unit key -> how many times it started."""
  out: dict = {}
  for p in Path(marks).iterdir(): out[p.name.split(".")[0]] = out.get(p.name.split(".")[0], 0) + 1
  return out


class RealCluster:
  """`dask scheduler` and `dask worker` processes (each its own process group), ended by id;
  resources[k], envs[k]: worker k's --resources and the variables added to its environment."""

  def __init__(self, tmp: Path, workers: int = 2, nanny: bool = True, resources: list | None = None, envs: list | None = None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    sfile = tmp / "scheduler.json"
    self.procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                    "--scheduler-file", str(sfile)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=env, start_new_session=True)]
    deadline = time.monotonic() + 60
    while not (sfile.exists() and sfile.stat().st_size) and time.monotonic() < deadline: time.sleep(0.05)
    self.address = json.loads(sfile.read_text())["address"]
    for k in range(workers):
      res = ["--resources", resources[k]] if resources and resources[k] else []
      self.procs.append(subprocess.Popen([str(BIN / "dask"), "worker", self.address, "--nworkers", "1", "--nthreads", "1",
                                          "--host", "127.0.0.1", "--no-dashboard", *(["--no-nanny"] if not nanny else []), *res],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env={**env, **(envs[k] if envs and envs[k] else {})}, start_new_session=True))
    from distributed import Client
    with Client(self.address, timeout=60) as c: c.wait_for_workers(workers, timeout=120)

  def scheduler(self) -> subprocess.Popen: return self.procs[0]

  def stop(self) -> None:
    for p in reversed(self.procs):
      try: os.killpg(p.pid, signal.SIGKILL)
      except ProcessLookupError: pass
      p.wait(30)
