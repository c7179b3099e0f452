"""`tinyspec conformance` and the graph fuzz on Dask (conformance/run/shards.py,
conformance/fuzz/graphunits.py): a backend with a planted bug (tests/support/planted_backend.py)
gives the same results in the same order, and the same reports (timings aside), on one
process, on two local processes and on a real `dask scheduler` with workers, in several
units each; a worker where the backend is absent runs none of its units; a backend no
worker has is named once; a backend's device chooses the resource its units need."""
from __future__ import annotations
import json
import re
import sys
from pathlib import Path
import pytest
from cluster_units import RealCluster
from tinyspec.cli import main
from tinyspec.conformance.fuzz import driver
from tinyspec.conformance.run import shards
from tinyspec.conformance.run.execute import resolve_backend
from tinyspec.conformance.run.onworker import backend_tag

PLANTED = Path(__file__).resolve().parents[1] / "support" / "planted_backend.py"


def planted(op: str) -> str:
  return f"cmd:{sys.executable} {PLANTED} {op}"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
  """A scheduler and three workers on 127.0.0.1: two where the planted backend marks each
  run with their name, one where it is absent (its hello refuses)."""
  tmp = tmp_path_factory.mktemp("cluster")
  marks = tmp / "marks"; marks.mkdir()
  rc = RealCluster(tmp, 3, envs=[{"PLANTED_MARKS": str(marks), "PLANTED_WORKER": "a"},
                                 {"PLANTED_MARKS": str(marks), "PLANTED_WORKER": "b"}, {"PLANTED_ABSENT": "1"}])
  try: yield rc, marks
  finally: rc.stop()


def _run(capsys, argv, folder: Path) -> tuple:
  code = main([str(a) for a in argv])
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err
  return code, out.out.replace(str(folder), "OUT"), out.err


def test_conformance_is_the_same_on_one_process_two_and_a_cluster(real, tmp_path, monkeypatch, capsys):
  """Shards of 5 cases (7 of them); --divergence 2 keeps the first divergent node of the
  first two failing cases of the run, whichever shards they ran in."""
  rc, marks = real
  monkeypatch.setattr(shards, "CASES_PER_UNIT", 5)
  seen = {}
  for name, extra in {"one": [], "two": ["--workers", "2"], "cluster": ["--scheduler", rc.address]}.items():
    d = tmp_path / name; d.mkdir()
    code, out, _ = _run(capsys, ["conformance", "--backend", planted("IDIV"), "-k", "IDIV/* or ADD/int* or MUL/int8",
                                 "--divergence", "2", "--json", d / "r.json", "--junit", d / "r.xml", "--html", d / "html", *extra], d)
    results = json.loads((d / "r.json").read_text())["results"]
    for r in results: r.pop("seconds")
    junit = re.sub(r' time="[0-9.]+"', "", (d / "r.xml").read_text())
    seen[name] = (code, out, results, junit, (d / "html" / "index.html").read_text())
  code, out, results, _, _ = seen["one"]
  failing = [r for r in results if r["status"] == "fail"]
  assert code == 1 and len(results) > 30 and len(failing) >= 6 and all(r["case"].startswith("IDIV/") for r in failing)
  assert [bool(r["divergence"]) for r in failing] == [True, True] + [False] * (len(failing) - 2)
  assert out.count("first divergent node:") == 2
  for name in ("two", "cluster"): assert seen[name] == seen["one"], name
  ran_on = {m.name.split(".")[0] for m in marks.iterdir()}
  assert ran_on == {"a", "b"}, ran_on   # both workers that have it, never the one where it is absent


def test_the_graph_fuzz_is_the_same_on_one_process_two_and_a_cluster(real, tmp_path, monkeypatch, capsys):
  """Units of 12 examples (3 of them, each finding the planted IDIV bug in its own dtypes):
  the same failures, lines and cases written."""
  rc, _ = real
  monkeypatch.setattr(driver, "UNIT_EXAMPLES", 12)
  seen = {}
  for name, extra in {"one": [], "two": ["--jobs", "2"], "cluster": ["--scheduler", rc.address]}.items():
    d = tmp_path / name; d.mkdir()
    code, out, _ = _run(capsys, ["fuzz", "--backend", planted("IDIV"), "--examples", "36", "--seed", "0", "--level", "tensor",
                                 "--out", d, *extra], d)
    out = re.sub(r", [0-9.]+ s \(", ", S s (", out)
    written = {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    seen[name] = (code, out, written)
  code, out, written = seen["one"]
  assert code == 1 and out.count("FAIL values: node") >= 2 and "36 examples" not in out   # (shrinking spends examples too)
  assert len({k.split("/")[1] for k in written}) == out.count("FAIL values: node")
  for name in ("two", "cluster"): assert seen[name] == seen["one"], name


def test_a_backend_no_worker_has_is_named_once(real, tmp_path, capsys):
  rc, _ = real
  missing = f"cmd:{tmp_path}/absent-backend"
  code, _, err = _run(capsys, ["conformance", "--backend", missing, "-k", "NEG/float32", "--scheduler", rc.address], tmp_path)
  assert code == 2 and err.count("no worker has absent-backend") == 1 and "dask worker ADDRESS --resources" in err
  code, _, err = _run(capsys, ["fuzz", "--backend", missing, "--examples", "2", "--scheduler", rc.address, "--out", tmp_path], tmp_path)
  assert code == 2 and err.count("no worker has absent-backend") == 1


def test_a_device_chosen_by_its_variable_is_part_of_the_tag(monkeypatch):
  assert backend_tag("c", (("TINYSPEC_OPENCL_DEVICE", "NVIDIA"),)) == "c"
  assert backend_tag("opencl", (("TINYSPEC_OPENCL_DEVICE", "NVIDIA"),)) == "opencl.NVIDIA"
  assert backend_tag("opencl", (("TINYSPEC_OPENCL_DEVICE", None),)) == "opencl"
  assert backend_tag("tinygrad", (("TINYSPEC_TINYGRAD_DEVICE", "CUDA"),)) == "tinygrad.CUDA"
  assert backend_tag(planted("IDIV"), ()) == resolve_backend(planted("IDIV")).label   # an external one's provisional name
  with pytest.raises(KeyError): backend_tag("no-such-backend", ())


def test_workers_whose_backends_differ_are_refused(tmp_path, monkeypatch):
  """Two shards whose backends said different labels (devices) are not one backend's results."""
  monkeypatch.setattr(shards, "CASES_PER_UNIT", 1)
  from tinyspec.conformance.cluster import Unit
  from tinyspec.conformance.corpus.cases import load_cases
  from tinyspec.conformance.corpus.manifest import Manifest
  from tinyspec.conformance.run.runner import Result
  cases = [c for c in load_cases() if c.id in ("NEG/float32", "NEG/int32")]
  job = shards.Job("tinygrad", None, None, 60.0, None, True, None, None, (), 20, ())
  emitted = []
  g = shards.Gathering({"tinygrad": job}, cases, tmp_path, lambda j, about, rs: emitted.extend(rs), lambda *a: None)
  for k, (case, label) in enumerate(zip(cases, ["tinygrad-CPU", "tinygrad-PYTHON"])):
    about = {"name": "tinygrad", "profile": "portable", "label": label, "manifest": Manifest()}
    g._arrived(Unit("conformance", "tinygrad", k, 1, k, "tinygrad"), {"results": [Result(case.id, "tinygrad", "pass").to_json()], "about": about})
  assert [r.case for r in emitted] == [c.id for c in cases] and g.mixed == {"tinygrad": {"tinygrad-CPU", "tinygrad-PYTHON"}}


def test_one_job_runs_here_without_a_cluster(tmp_path, monkeypatch, capsys):
  """--workers 1 and --jobs 1 (the defaults) call the unit functions in this process: no
  Dask cluster is started (it would cost more than a short run takes)."""
  from tinyspec.conformance import cluster
  def refused(*a, **kw): raise AssertionError("a Dask cluster was started for one job")
  monkeypatch.setattr(cluster.Cluster, "__enter__", refused)
  monkeypatch.delenv("TINYSPEC_SCHEDULER", raising=False)
  monkeypatch.chdir(tmp_path)
  code, out, _ = _run(capsys, ["conformance", "--backend", "ref", "-k", "NEG/float32"], tmp_path)
  assert code == 0 and "1 passed" in out
  code, out, _ = _run(capsys, ["fuzz", "--backend", "ref", "--examples", "3", "--level", "tensor", "--out", tmp_path / "f"], tmp_path)
  assert code == 0 and "3 examples, 0 failures" in out


def test_a_graph_fuzz_with_a_database_resumes_its_units(tmp_path, monkeypatch, capsys):
  """--db PATH: the units finished before are taken from the database, not run again, and
  the run says the same; the failures are kept there with their repro."""
  from tinyspec.conformance.findings import Findings
  monkeypatch.setattr(driver, "UNIT_EXAMPLES", 15)
  argv = ["fuzz", "--backend", planted("IDIV"), "--examples", "30", "--seed", "0", "--level", "tensor", "--out", tmp_path / "o",
          "--db", tmp_path / "db.sqlite"]
  first = _run(capsys, argv, tmp_path)
  again = _run(capsys, argv, tmp_path)
  assert first[0] == again[0] == 1 and "2 of 2 units were finished before" in again[2]
  strip = lambda out: [x for x in out.splitlines() if x.startswith("FAIL")]
  assert strip(first[1]) == strip(again[1]) and strip(first[1])
  rows = Findings(tmp_path / "db.sqlite").rows()
  assert rows and all(r["op"] == "IDIV" and r["repro"] for r in rows)


def test_something_else_answering_at_the_address_is_no_scheduler(tmp_path, capsys):
  """A server that answers the handshake with garbage (a length of exabytes): one line,
  cluster.unreachable, exit 2, at once; no traceback, nothing said later by the client's
  garbage collection."""
  import gc
  import socket
  import threading
  srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(4)
  def answer():
    while True:
      try: conn, _ = srv.accept()
      except OSError: return
      conn.sendall(b"\xff" * 64)
  threading.Thread(target=answer, daemon=True).start()
  try:
    for argv in (["conformance", "--backend", "ref", "-k", "NEG/float32"], ["fuzz", "--backend", "ref", "--examples", "1", "--out", tmp_path]):
      code, _, err = _run(capsys, [*argv, "--scheduler", f"tcp://127.0.0.1:{srv.getsockname()[1]}"], tmp_path)
      gc.collect()
      err += capsys.readouterr().err
      assert code == 2 and "[cluster.unreachable]" in err and err.count("\n") == 1, err
  finally:
    srv.close()
