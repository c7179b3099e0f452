"""The pytest plugin that captures tinygrad's own tests (docs/tinygrad-suite.md).

  pytest -p tinyspec.interop.suite.plugin --tinygrad-suite-out DIR [--tinygrad-suite-limit S]
         [--tinygrad-suite-levels tensor,kernel,program] [--tinygrad-suite-classes FILE] TESTS...

Loaded into tinygrad's pytest run (not installed as an entry point: it acts on every test
it sees). Each test's call phase (unittest's setUp, test and tearDown) runs under
interop.capture; after it, each realize's schedule is imported and checked (check.py) and
written as one JSON line to DIR/records-WORKER.jsonl, with one line per test (its outcome
and how many schedules it realized). The checking runs after the call phase, outside the
test's own timeout (tinygrad's conftest), under a limit per graph. At the end of the
session the terminal summary gives the failure classes and the summary line (report.py).

tinygrad must be the installed release the map table names (0.14.0), not a checkout's
tinygrad/: the plugin refuses to run otherwise (a UsageError: pytest exits 4).
"""
from __future__ import annotations
import json
import time
from pathlib import Path
import importlib.metadata
import pytest
from tinyspec.interop.suite.check import LEVELS, schedule_record
from tinyspec.interop.suite.classify import TableError, load_rules
from tinyspec.interop.tinygrad_map import mapping
from tinyspec.interop.capture import capture
from tinyspec.interop.script import ScriptResult
from tinyspec.interop.suite.kept import folder_name
from tinyspec.interop.suite.report import load, summarize

_RECORDS = pytest.StashKey[list]()
_OUTCOME = pytest.StashKey[tuple]()   # (outcome, what failed: the exception's line, or "")


def pytest_addoption(parser):
  g = parser.getgroup("tinygrad-suite", "tinyspec: capture tinygrad's own tests (tinyspec.interop.suite)")
  g.addoption("--tinygrad-suite-out", metavar="DIR", default=None, help="where the records go (required)")
  g.addoption("--tinygrad-suite-limit", metavar="S", type=float, default=60.0,
              help="seconds to import and check one graph (default 60; 0: no limit)")
  g.addoption("--tinygrad-suite-levels", metavar="L,...", default="tensor,kernel,program",
              help="the graphs of a schedule to check: tensor, kernel, program (default all)")
  g.addoption("--tinygrad-suite-classes", metavar="FILE", default=None,
              help="the classification table (default: the shipped interop/suite/classes.yaml)")
  g.addoption("--tinygrad-suite-keep", action="store_true", default=False,
              help="write each graph that imported but failed (graph, inputs, tinygrad's values) to DIR/failing/TEST/")


def pytest_configure(config):
  out = config.getoption("tinygrad_suite_out")
  if not out: raise pytest.UsageError("tinygrad suite: --tinygrad-suite-out DIR is required (where the records go)")
  levels = tuple(x.strip() for x in config.getoption("tinygrad_suite_levels").split(",") if x.strip())
  if not levels or set(levels) - set(LEVELS):
    raise pytest.UsageError(f"tinygrad suite: --tinygrad-suite-levels takes some of {', '.join(LEVELS)}, not {','.join(levels)!r}")
  _check_pinned_tinygrad()
  try: rules = load_rules(config.getoption("tinygrad_suite_classes"))
  except TableError as e: raise pytest.UsageError(f"tinygrad suite: {e}") from None
  out = Path(out)
  out.mkdir(parents=True, exist_ok=True)
  if not hasattr(config, "workerinput"):   # the controller (or a run without pytest-xdist): a fresh set of records
    for f in out.glob("records-*.jsonl"): f.unlink()
  worker = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"   # (not the environment: a pytest run inside an xdist worker's test inherits it)
  keep = out / "failing" if config.getoption("tinygrad_suite_keep") else None
  config.pluginmanager.register(_Capturer(out / f"records-{worker}.jsonl", levels, config.getoption("tinygrad_suite_limit"), keep, rules),
                                "tinygrad-suite-capturer")


def _check_pinned_tinygrad() -> None:
  """The tests must run against the tinygrad release the importer maps: refuse another."""
  import tinygrad  # noqa: PLC0415 (tinygrad, an optional dependency)
  want = str(mapping()["tinygrad"])
  where = Path(tinygrad.__file__).resolve().parent
  try: have = importlib.metadata.version("tinygrad")
  except importlib.metadata.PackageNotFoundError: have = None
  dist = Path(importlib.metadata.distribution("tinygrad").locate_file("tinygrad")).resolve() if have else None
  if have != want or dist != where:
    raise pytest.UsageError(f"tinygrad suite: tinygrad is imported from {where} (installed: {have or 'none'}); the importer "
                            f"maps the installed release {want}: run from a folder without a tinygrad/ package "
                            f"(scripts/tinygrad-suite.sh runs the checkout's test/ from a folder that links only it)")


class _Capturer:
  def __init__(self, path: Path, levels: tuple, limit: float, keep: Path | None, rules: list):
    self.path, self.levels, self.limit, self.keep, self.rules = path, levels, (limit or None), keep, rules

  def _write(self, rec: dict) -> None:
    with open(self.path, "a", encoding="utf-8") as f: f.write(json.dumps(rec) + "\n")

  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_call(self, item):
    with capture() as cap:
      try:
        return (yield)
      finally:
        item.stash[_RECORDS] = cap.realizations

  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_makereport(self, item, call):
    rep = yield
    if rep.when == "call" or (rep.when == "setup" and not rep.passed):
      crash = getattr(rep.longrepr, "reprcrash", None) if rep.failed else None
      item.stash[_OUTCOME] = (rep.outcome, (crash.message.splitlines() or [""])[0][:300] if crash is not None else "")
    return rep

  @pytest.hookimpl(tryfirst=True)
  def pytest_runtest_teardown(self, item):
    realizations = item.stash.get(_RECORDS, None)
    if realizations is None:   # the call phase did not run (skipped or failed in setup)
      outcome, error = item.stash.get(_OUTCOME, ("skipped", ""))
      self._write({"kind": "test", "test": item.nodeid, "outcome": outcome, "error": error, "ran": False, "schedules": 0})
      return
    t0, n, failing = time.perf_counter(), 0, []
    for r in realizations:
      if not r.calls and not r.jit: continue   # nothing was scheduled (the realize found every tensor done); a TinyJit's ran after it
      self._write({"kind": "schedule", **schedule_record(item.nodeid, r, self.levels, self.limit, failing)})
      n += 1
    del item.stash[_RECORDS]
    if self.keep is not None and failing:
      ScriptResult(item.nodeid, graphs=failing).write(self.keep / folder_name(item.nodeid))
    outcome, error = item.stash.get(_OUTCOME, ("unknown", ""))
    self._write({"kind": "test", "test": item.nodeid, "outcome": outcome, "error": error, "ran": outcome != "skipped",   # unittest skips in the call phase
                 "schedules": n, "check_seconds": round(time.perf_counter() - t0, 3)})

  def pytest_terminal_summary(self, terminalreporter, config):
    if hasattr(config, "workerinput"): return
    s = summarize(load(self.path.parent), self.rules)
    terminalreporter.section("tinygrad suite (tinyspec)")
    for line in s.class_lines(): terminalreporter.write_line(line)
    terminalreporter.write_line(s.line())
