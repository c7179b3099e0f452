"""Searches on Dask distributed (conformance/cluster.py, conformance/fuzz/units.py) and the
findings database (conformance/findings.py): the same units give the same examples,
refusals and findings on one process, N processes and a cluster (a planted bug); a worker
SIGKILLed mid-unit loses nothing and counts nothing twice; a scheduler that goes away is
one clear error and keeps what was found; a tag no worker has is named once; a resumed run
runs no unit twice; Hypothesis's failing examples replay from the database. The real
`dask scheduler` / `dask worker` processes run on 127.0.0.1 from this venv, with the cheap
units of tests/support/cluster_units.py where the sanitizer is not the point."""
from __future__ import annotations
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
import pytest
from cluster_units import RealCluster, sleepy_unit, starts
from tinyspec.conformance import cluster
from tinyspec.conformance.cluster import Unit, split, Progress
from tinyspec.conformance.findings import Findings, FindingsError, example_database, markdown_text, table_text
from tinyspec.conformance.fuzz import sanitize
from tinyspec.conformance.fuzz.units import run_units, said

PLANTS = Path(__file__).resolve().parents[1] / "support" / "plants"
needs_sanitizers = pytest.mark.skipif(sanitize.unavailable() is not None, reason=str(sanitize.unavailable()))


def test_units_split_evenly_and_their_keys_name_them():
  assert split(0, 40) == [] and split(40, 40) == [40] and split(41, 40) == [21, 20] and split(100, 40) == [34, 33, 33]
  u = Unit("sanitize", "alias", 7063, 22, 7, "c.sanitize")
  assert u.key == "tinyspec-sanitize-alias-s7063-n22-i7" and u == Unit("sanitize", "alias", 7063, 22, 7, "c.sanitize")


def test_the_sanitizer_plan_depends_on_examples_seed_and_families_alone():
  """The CI slice keeps one unit per family, seeded by its place in FAMILIES (so the plant
  hunts of test_fuzz_sanitize.py draw the slice's examples); a larger run cuts each share."""
  from tinyspec.conformance.fuzz.hostile import FAMILIES
  slice_ = sanitize.plan(sanitize.CI_EXAMPLES, sanitize.CI_SEED, FAMILIES)
  assert [(u.name, u.seed, u.share) for u in slice_] == [(f, sanitize.CI_SEED + 1009 * k, n)
                                                         for k, (f, n) in enumerate(sanitize.shares(sanitize.CI_EXAMPLES, FAMILIES).items())]
  big = sanitize.plan(1000, 3, FAMILIES)
  assert sum(u.share for u in big) == 1000 and max(u.share for u in big) <= sanitize.UNIT_EXAMPLES
  assert [u.index for u in big] == list(range(len(big))) and len({u.key for u in big}) == len(big)
  assert big == sanitize.plan(1000, 3, FAMILIES) and {u.needs for u in big} == {sanitize.SANITIZE_TAG}


@needs_sanitizers
def test_one_process_n_processes_and_a_cluster_find_the_same(tmp_path, monkeypatch):
  """A planted bug (tests/support/plants, `alias`): 1 process, 2 local processes and a
  real scheduler with two workers draw the same examples per family, the same refusals and
  the same findings (units of 5 examples, so each family is several units)."""
  monkeypatch.setattr(sanitize, "UNIT_EXAMPLES", 5)
  fams, env = ["chain", "alias"], {"PYTHONPATH": str(PLANTS), "TINYSPEC_PLANT": "alias"}
  runs = {"one": dict(jobs=1), "two": dict(jobs=2)}
  rc = RealCluster(tmp_path, 2)
  try:
    runs["cluster"] = dict(scheduler=rc.address)
    reps = {k: sanitize.fuzz_sanitized(20, sanitize.CI_SEED, None, families=fams, shrink=False, extra_env=env, **kw) for k, kw in runs.items()}
  finally:
    rc.stop()
  one = reps["one"]
  assert one.failures, "the planted alias bug was not found: the test shows nothing"
  for name, rep in reps.items():
    assert (rep.drawn, rep.examples, rep.refused) == (one.drawn, 20, one.refused), name
    assert [f.signature for f in rep.failures] == [f.signature for f in one.failures], name


def test_a_worker_killed_mid_unit_loses_nothing_and_counts_nothing_twice(tmp_path):
  """SIGKILL of a worker process (no nanny: it stays dead) while it runs a unit: Dask runs
  that unit again on the other worker; every unit's result comes home once, and the
  database counts each finding once."""
  marks = tmp_path / "marks"; marks.mkdir()
  rc = RealCluster(tmp_path, 2, nanny=False)
  killed = {}
  def kill_when_busy():   # the worker that started a unit within the last 0.3 s (of its 0.7): mid-unit for sure
    while not killed:
      fresh = [m.name.split(".") for m in marks.iterdir()]
      fresh = [(int(t), int(pid), key) for key, pid, t in fresh if time.monotonic_ns() - int(t) < 0.3e9]
      if len(list(marks.iterdir())) >= 2 and fresh:
        _, pid, key = max(fresh)
        os.kill(pid, signal.SIGKILL)
        killed.update(pid=pid, unit=key)
      time.sleep(0.02)
  t = threading.Thread(target=kill_when_busy, daemon=True)
  plan = [Unit("test", "x", 100 + k, 1, k) for k in range(8)]
  try:
    t.start()
    ran = run_units(plan, sleepy_unit, (0.7, str(marks)), "kill", tmp_path / "db.sqlite", rc.address)
    t.join(10)
  finally:
    rc.stop()
  assert killed.get("pid") and ran.lost is None
  assert sorted(ran.results) == sorted(u.key for u in plan) and [u.key for u in ran.order] == [u.key for u in plan]
  assert [ran.results[u.key]["seed"] for u in plan] == [u.seed for u in plan]
  assert starts(marks)[killed["unit"]] == 2, "the unit its worker was killed in did not run again elsewhere"
  db = Findings(tmp_path / "db.sqlite")
  assert sorted((r["signature"], r["count"]) for r in db.rows()) == [(json.dumps(["planted", k]), 1) for k in range(3)]
  assert len(db.done_units("kill")) == 8


def test_a_scheduler_that_goes_away_is_one_error_and_keeps_the_findings(tmp_path, capsys):
  marks = tmp_path / "marks"; marks.mkdir()
  rc = RealCluster(tmp_path, 1)
  def kill_scheduler():   # while the second unit runs (0.3 s into its 0.6): the first one's result is home by then
    while True:
      ts = sorted(int(m.name.split(".")[2]) for m in marks.iterdir())
      if len(ts) >= 2 and time.monotonic_ns() - ts[1] > 0.3e9: break
      time.sleep(0.02)
    os.killpg(rc.scheduler().pid, signal.SIGKILL)
  threading.Thread(target=kill_scheduler, daemon=True).start()
  plan = [Unit("test", "x", k, 1, k) for k in range(6)]
  try: ran = run_units(plan, sleepy_unit, (0.6, str(marks)), "lost", tmp_path / "db.sqlite", rc.address)
  finally: rc.stop()
  assert isinstance(ran.lost, cluster.ClusterLost) and ran.lost.rule == "cluster.lost"
  done = [u for u in plan if u.key in ran.results]
  assert done == plan[:len(done)] and 1 <= len(done) < len(plan)   # (the first, and the second if it won the race)
  kept = sorted(r["signature"] for r in Findings(tmp_path / "db.sqlite").rows())
  assert kept == sorted(json.dumps(["planted", u.index // 3]) for u in done if u.index % 3 == 0) == [json.dumps(["planted", 0])]
  class Rep: resumed, missing, lost = 0, [], ran.lost
  assert said("tinyspec fuzz", Rep, tmp_path / "db.sqlite", 6) == cluster.EXIT_LOST == 3
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "[cluster.lost]" in err and f"went away after {len(done)} units" in err and "Traceback" not in err


def test_an_unreachable_scheduler_is_refused_once(tmp_path, monkeypatch, capsys):
  from tinyspec.cli import main
  monkeypatch.setattr(cluster, "LOST_AFTER", 1.0)
  monkeypatch.chdir(tmp_path)
  rc = main(["fuzz", "--backend", "c", "--sanitize", "--examples", "1", "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path / "o")])
  err = capsys.readouterr().err
  assert rc == 2 and err.count("\n") == 1 and "[cluster.unreachable]" in err and "127.0.0.1:9" in err


def test_a_tag_no_worker_has_is_named_once_and_the_others_run(tmp_path, capsys):
  """Units that need a tag run where a worker has it (declared as a resource, or named by
  the probe); a tag no worker has is named once and its units do not run."""
  marks = tmp_path / "marks"; marks.mkdir()
  plan = [Unit("test", d, k, 1, k, f"tinygrad.{d}") for k, d in enumerate(["CUDA", "NOPE", "FAKE", "NOPE", "CUDA"])]
  ran = run_units(plan, sleepy_unit, (0.0, str(marks)), "tags", None, None, 1, probe=_fake_probe, resources={"tinygrad.CUDA": 1})
  assert ran.missing == ["tinygrad.NOPE"] and [u.name for u in ran.order] == ["CUDA", "FAKE", "CUDA"]
  class Rep: resumed, lost, missing = 0, None, ran.missing
  assert said("tinyspec fuzz", Rep, tmp_path / "db", 5) is None
  err = capsys.readouterr().err
  assert err.count("tinygrad.NOPE") == 2 and err.count("\n") == 1   # the line, and the --resources it suggests


def _fake_probe():
  return ["tinygrad.FAKE"]


def test_a_resumed_run_runs_no_finished_unit_again(tmp_path):
  marks = tmp_path / "marks"; marks.mkdir()
  plan = [Unit("test", "x", k, 2, k) for k in range(4)]
  first = run_units(plan[:2], sleepy_unit, (0.0, str(marks)), "resume", tmp_path / "db.sqlite")
  again = run_units(plan, sleepy_unit, (0.0, str(marks)), "resume", tmp_path / "db.sqlite")
  assert first.resumed == 0 and again.resumed == 2 and set(starts(marks).values()) == {1} and len(starts(marks)) == 4
  assert [again.results[u.key]["examples"] for u in plan] == [2] * 4
  assert [r["count"] for r in Findings(tmp_path / "db.sqlite").rows()] == [1, 1]


def test_a_unit_recorded_twice_counts_once(tmp_path):
  db = Findings(tmp_path / "f.sqlite")
  found = [{"signature": "s", "text": "t", "op": "ADD"}]
  assert db.record("h", "u1", {"examples": 1}, found, "w") and not db.record("h", "u1", {"examples": 1}, found, "w")
  assert db.record("h", "u2", {"examples": 1}, found, "w2")
  (row,) = db.rows()
  assert (row["count"], row["first_where"], row["first_unit"]) == (2, "w", "u1")


@pytest.mark.parametrize("kind", ["garbage", "other-sqlite", "directory", "fifo", "missing", "long-name"])
def test_a_file_that_is_not_a_findings_database_is_refused(tmp_path, kind, capsys):
  from tinyspec.cli import main
  p = tmp_path / ("x" * 300 if kind == "long-name" else "db")
  if kind == "garbage": p.write_bytes(b"\x00not sqlite at all" * 100)
  elif kind == "other-sqlite": sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit()
  elif kind == "directory": p.mkdir()
  elif kind == "fifo": os.mkfifo(p)
  before = p.read_bytes() if kind in ("garbage", "other-sqlite") else None
  with pytest.raises(FindingsError): Findings(p, create=kind != "missing")
  assert main(["findings", str(p)]) == 2
  err = capsys.readouterr().err
  assert "[findings.db]" in err and "Traceback" not in err
  if before is not None: assert p.read_bytes() == before   # nothing written to it


def test_findings_are_listed_as_a_table_json_and_markdown(tmp_path, capsys):
  from tinyspec.cli import main
  db = Findings(tmp_path / "f.sqlite")
  db.record("campaign seed=0", "u1", {}, [{"signature": '["tinygrad", ["MUL"], ["float"], "CPU", "nan"]', "op": "MUL", "dtype_class": "float",
                                          "device": "CPU", "kind": "nan", "text": "values: node 3 (MUL, float32): \x1b[2J nan",
                                          "repro": "import numpy\nprint(1)"}], "tcp://127.0.0.1:1")
  db.close()
  assert main(["findings", str(tmp_path / "f.sqlite")]) == 0
  table = capsys.readouterr().out
  assert "MUL" in table and "CPU" in table and "\x1b" not in table and table.splitlines()[0].startswith("count")
  assert main(["findings", str(tmp_path / "f.sqlite"), "--json"]) == 0
  (row,) = json.loads(capsys.readouterr().out)
  assert row["count"] == 1 and row["kind"] == "nan" and row["first_where"] == "tcp://127.0.0.1:1"
  md = markdown_text([row])
  assert md.startswith("# 1 findings") and "## MUL float on CPU nan" in md and "```python\nimport numpy" in md
  assert table_text([]) == "no findings"


def test_a_failing_example_replays_from_the_database_on_another_search():
  """Hypothesis's entries travel as data: a failure saved by one search (one worker) is the
  first example of the next search of that key (another worker, another seed)."""
  from hypothesis import strategies as st
  from tinyspec.conformance.fuzz.checks import Failure
  from tinyspec.conformance.fuzz.search import search
  def check(x, found):
    return Failure("planted", None, None, None, "big", None) if x >= 900 else None
  first = example_database([])
  n1, f1 = search(st.integers(0, 1000), 500, 1, check, set(), shrink=True, database=first, database_key=b"tinyspec/test/x")
  assert f1 is not None and first.saved
  again = example_database([(bytes.fromhex(k), bytes.fromhex(v)) for k, v in first.saved])
  n2, f2 = search(st.integers(0, 1000), 500, 2, check, set(), shrink=False, database=again, database_key=b"tinyspec/test/x")
  assert f2 is not None and n2 <= 2, f"the saved example was not replayed first ({n2} examples)"   # (Hypothesis runs a failure once more to report it)
  fresh = example_database([])
  n3, _ = search(st.integers(0, 1000), 500, 2, check, set(), shrink=False, database=fresh, database_key=b"tinyspec/test/x")
  assert n3 > 2


def test_the_progress_line_names_rates_findings_and_the_dashboard():
  import io
  s = io.StringIO()
  p = Progress(4, "fuzz --sanitize", "http://127.0.0.1:8787/status", True, stream=s)
  p.unit_done("tcp://127.0.0.1:4001", 10, 1)
  p.unit_done("tcp://127.0.0.1:4002", 5, 0)
  line = p.line()
  assert line.startswith("fuzz --sanitize: 2/4 units, 15 examples (127.0.0.1:4001 ") and "127.0.0.1:4002" in line
  assert "1 findings" in line and line.endswith("dashboard http://127.0.0.1:8787/status")
  assert "/s" in line and s.getvalue().count("\n") == 1   # a plain line at most every 30 s without a terminal


def test_the_campaign_plan_takes_turns_and_ends_with_examples():
  from tinyspec.interop import campaign as C
  from tinyspec.interop.campaign_units import plan
  units = list(plan(["PYTHON", "CL"], 5, C.FUZZ_EXAMPLES + 1))
  assert [(u.kind, u.name) for u in units[:6]] == [("campaign-fuzz", "PYTHON"), ("campaign-fuzz", "CL"),
                                                   ("campaign-programs", "PYTHON"), ("campaign-programs", "CL"),
                                                   ("campaign-compositions", "PYTHON"), ("campaign-compositions", "CL")]
  assert len(units) == 12 and sum(u.share for u in units if u.kind == "campaign-fuzz") == 2 * (C.FUZZ_EXAMPLES + 1)
  assert {u.needs for u in units} == {"tinygrad.PYTHON", "tinygrad.CL"} and units == list(plan(["PYTHON", "CL"], 5, C.FUZZ_EXAMPLES + 1))
  endless = plan(["PYTHON"], 5)
  assert [next(endless).seed for _ in range(4)] == [5, 5 * 1000003 + 1, 5 * 1000003 + 2, 8]


def test_the_scheduler_setting_and_variable_are_checked(tmp_path, monkeypatch):
  from tinyspec.conformance.cluster import scheduler_address
  from tinyspec.conformance.run.settings import load_settings, SettingsError
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec]\nscheduler = "tcp://10.1.2.3:8786"\n')
  s = load_settings(tmp_path)
  monkeypatch.delenv("TINYSPEC_SCHEDULER", raising=False)
  assert scheduler_address(None, s) == ("tcp://10.1.2.3:8786", s.where())
  monkeypatch.setenv("TINYSPEC_SCHEDULER", "tcp://127.0.0.1:8786")
  assert scheduler_address(None, s)[0] == "tcp://127.0.0.1:8786" and scheduler_address("tcp://h:1", s)[0] == "tcp://h:1"
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec]\nscheduler = "not an address; rm -rf"\n')
  with pytest.raises(SettingsError, match=r"scheduler.*\[file.schema\]"): load_settings(tmp_path)


def test_a_campaign_sorts_its_units_findings_and_resumes(tmp_path, monkeypatch):
  """The campaign's units (interop/campaign_units.py) with a planted fuzz turn: a new bug
  found by two units is one bug seen twice, its repro.py comes home under OUT/DEVICE/repros,
  the database keeps it once per unit, and the same campaign again runs no unit."""
  from tinyspec.interop import campaign as C
  from tinyspec.interop.hunt import Verdict
  calls = []
  def planted_turn(part, dev, seed, out, triage, log, examples=0, database=None, database_key=None):
    calls.append(seed)
    part.examples += examples
    repro = Path(out) / "repros" / f"ADD-float32-nan-{dev}-x" / "repro.py"
    repro.parent.mkdir(parents=True)
    repro.write_text("import tinygrad  # planted\n")
    class F:
      triage = Verdict("new", why="planted", repro=repro, facts={"ops": {"ADD"}, "classes": {"float"}, "device": dev, "kind": "nan"})
      def __str__(self): return "values: node 2 (ADD, float32): planted"
    C.record(part, F(), log)
  monkeypatch.setattr(C, "_fuzz_turn", planted_turn)
  monkeypatch.setattr(C, "PROGRAMS_PER_TURN", 0)
  monkeypatch.setattr(C, "_composition_turn", lambda *a, **k: None)
  monkeypatch.setattr(C, "FUZZ_EXAMPLES", 3)
  from tinyspec.interop.campaign_units import campaign
  lines, again = [], []
  rep = campaign(5, ["PYTHON"], tmp_path / "out", 1, lines.append, lambda d: None, examples=6, db=tmp_path / "db.sqlite")
  assert calls == [1, 4] and rep.examples == 6 and len(rep.new) == 1 and rep.repeats[next(iter(rep.new))] == 1
  (v, _), = rep.new.values()
  assert v.repro == tmp_path / "out" / "PYTHON" / "repros" / "ADD-float32-nan-PYTHON-x" / "repro.py" and "planted" in v.repro.read_text()
  assert sum(line.startswith("NEW BUG ADD float on PYTHON: nan") for line in lines) == 2   # when found, and in the summary
  (row,) = Findings(tmp_path / "db.sqlite").rows()
  assert row["count"] == 2 and row["device"] == "PYTHON" and row["repro"].startswith("import tinygrad")
  rep2 = campaign(5, ["PYTHON"], tmp_path / "out", 1, again.append, lambda d: None, examples=6, db=tmp_path / "db.sqlite")
  assert calls == [1, 4] and rep2.resumed == 6 and rep2.examples == 6 and list(rep2.new) == list(rep.new)
