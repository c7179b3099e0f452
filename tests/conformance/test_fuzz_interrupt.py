"""The graph fuzz's processes: --jobs beyond its units starts no more processes than units,
and Ctrl-C during a run on the embedded LocalCluster (SIGINT to the whole process group,
as a terminal sends it) ends it cleanly: exit 130, one line saying so and where the
findings of the finished units are, no traceback from the command or its Dask workers,
the findings in the database."""
from __future__ import annotations
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from hostile import cli
from tinyspec.conformance import cluster
from tinyspec.conformance.fuzz import driver, units

PLANTED = Path(__file__).resolve().parents[1] / "support" / "planted_backend.py"


def test_jobs_beyond_the_units_start_no_more_processes_than_units(tmp_path, monkeypatch):
  asked = []
  def here(address=None, workers=1, resources=None):   # record what the command asks for, run in this process
    asked.append(workers); return cluster.Here(resources)
  monkeypatch.setattr(units, "open_cluster", here)
  monkeypatch.setattr(driver, "UNIT_EXAMPLES", 2)
  rc, text = cli("fuzz", "--backend", "ref", "--examples", "8", "--level", "tensor", "--jobs", str(10 ** 9), "--out", tmp_path / "o")
  assert rc == 0 and "8 examples, 0 failures" in text, text
  assert asked == [4], asked   # 8 examples in units of 2


def test_sigint_during_a_graph_fuzz_on_a_local_cluster_ends_cleanly(tmp_path):
  db = tmp_path / "db.sqlite"
  argv = [sys.executable, "-c", "import sys; from tinyspec.cli import main; sys.exit(main())", "fuzz", "--backend",
          f"cmd:{sys.executable} {PLANTED} IDIV", "--examples", "2000", "--seed", "0", "--level", "tensor", "--jobs", "2",
          "--out", str(tmp_path / "o"), "--db", str(db), "--progress"]
  p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True,
                       preexec_fn=_default_sigint)
  seen, deadline = [], time.monotonic() + 240
  try:
    for line in p.stderr:   # the progress line, until a unit has finished
      seen.append(line)
      if re.search(r"fuzz: [1-9]\d*/40 units", line) or time.monotonic() > deadline: break
    assert re.search(r"fuzz: [1-9]\d*/40 units", seen[-1]), "".join(seen)
    os.killpg(p.pid, signal.SIGINT)   # Ctrl-C: the command and its Dask workers alike
    out, err = p.communicate(timeout=120)
  finally:
    if p.poll() is None: os.killpg(p.pid, signal.SIGKILL)
  err = "".join(seen) + err
  assert p.returncode == 130, (p.returncode, out, err)
  assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, out + err
  assert f"interrupted by SIGINT; the findings of the units that finished are kept in {db}" in err, err
  from tinyspec.conformance.findings import Findings
  rows = Findings(db).rows()
  assert rows and all(r["op"] == "IDIV" for r in rows), rows   # the planted bug, found before the interrupt


def _ignores_sigint() -> bool: return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def _default_sigint():   # Ctrl-C as a terminal's command gets it (a test run started in the background ignores SIGINT, and children inherit that)
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_embedded_workers_leave_ctrl_c_to_the_command():
  """What keeps the workers' tracebacks away, without the race of the test above: every
  worker process of the LocalCluster ignores SIGINT, and the command's own handler is back."""
  before = signal.getsignal(signal.SIGINT)
  with cluster.Cluster(None, 2) as c:
    got = c.client.run(_ignores_sigint)
  assert len(got) == 2 and all(got.values()), got
  assert signal.getsignal(signal.SIGINT) is before
