"""The pytest plugin of the conformance suite: run the case corpus as tests.

  pytest --pyargs tinyspec.conformance --tinyspec-backend=c [--tinyspec-cases=DIR] [--tinyspec-case=ID]
         [--tinyspec-manifest=FILE] [--tinyspec-case-timeout=S] [--tinyspec-profile=P] [-k EXPR] [-n 4]

Installed as a `pytest11` entry point, so it is loaded by every pytest run in the
environment: it adds only `--tinyspec-*` options and `tinyspec_*` ini keys, and does
nothing until the corpus's own test (conformance/test_cases.py) is collected, so another
project's `--backend` or `--cases` is left to it. Settings, first that is given: the
command line; the ini keys (`tinyspec_backend = c` in pytest.ini, tox.ini, setup.cfg or
pyproject.toml [tool.pytest.ini_options], paths relative to that file); the project's
pyproject.toml [tool.tinyspec] (conformance/run/settings.py); the defaults (backend ref, the
shipped corpus, 60 s a case).

One test per case; each pytest process (each pytest-xdist worker) runs the backend in one
worker process of its own, so a crash fails one test. Cases the backend's capabilities do
not cover are skipped; the backend's manifest (conformance/corpus/manifest.py) marks its expected
failures xfail(strict=True) and its exclusions skip. A failure is `pytest.fail(message,
pytrace=False)`: the runner's message (differing elements, operands, profile, repro
command), no traceback. An unknown backend or a setting that cannot be used is the
collection's error, its message alone (pytest exits 2). A session in which no case ran
(all skipped) exits 5, as pytest does when nothing is collected.
"""
from __future__ import annotations
import shlex
from pathlib import Path
import pytest

OPTIONS = {   # name -> (help, default, type): --tinyspec-NAME on the command line, tinyspec_NAME in the ini file
  "backend": ("the backend to test: a registered name, cmd:COMMAND, or an executable (default ref)", None, str),
  "cases": ("the case corpus folder (default: the corpus shipped with tinyspec)", None, Path),
  "manifest": ("expected failures and exclusions; none: no manifest (default: [tool.tinyspec.manifests], the backend's own, the shipped one)", None, Path),
  "case-timeout": ("seconds per case before it fails as a hang (default 60)", None, float),
  "profile": ("judge by the canonical results (strict) or any allowed one (portable); default: the backend's", None, str),
}
CASE_ID = "tinyspec_case"   # the marker on each corpus test (how the session's end finds them, over pytest-xdist too)


def pytest_addoption(parser):
  g = parser.getgroup("tinyspec", "tinyspec conformance (pytest --pyargs tinyspec.conformance)")
  for name, (help, default, _) in OPTIONS.items():
    g.addoption(f"--tinyspec-{name}", dest=_dest(name), default=default, metavar=name.split("-")[-1].upper(), help=help)
    parser.addini(_dest(name), help=f"tinyspec conformance: {help}", default="")
  g.addoption("--tinyspec-case", dest="tinyspec_case_ids", action="append", metavar="ID", default=None,
              help="run exactly the case ID (repeatable)")


def pytest_configure(config):
  config.addinivalue_line("markers", f"{CASE_ID}: a case of the tinyspec conformance corpus")
  config.pluginmanager.register(_Tally(), "tinyspec-tally")


def _dest(name: str) -> str: return "tinyspec_" + name.replace("-", "_")


_SETTINGS = pytest.StashKey[dict]()
_RUNNER = pytest.StashKey[object]()


def _refuse(msg: str):
  """A setting that cannot be used: the corpus's collection error, its message alone (no
  traceback); pytest stops before running anything (exit 2, as `tinyspec conformance`)."""
  from tinyspec.files import printable
  raise pytest.Collector.CollectError(printable(f"tinyspec conformance: {msg}")) from None


def settings(config) -> dict:
  """The settings (name -> value; None where unset) from the command line, the ini file and
  [tool.tinyspec], read once; one that cannot be used stops the collection (_refuse)."""
  if _SETTINGS in config.stash: return config.stash[_SETTINGS]
  from tinyspec import environment
  from tinyspec.files import control_character
  from tinyspec.conformance.run.settings import load_settings, SettingsError
  try: environment.check_all()
  except environment.EnvironmentValue as e: _refuse(str(e))
  try: project = load_settings(config.invocation_params.dir)
  except SettingsError as e: _refuse(str(e))
  ini_dir = Path(config.inipath).parent if config.inipath else Path(config.invocation_params.dir)
  out = {"manifests": project.manifests, "case_ids": config.getoption("tinyspec_case_ids"), "project": None}
  for name, (_, _default, kind) in OPTIONS.items():
    v = config.getoption(_dest(name))
    ini = config.getini(_dest(name))
    for where, text in ((f"--tinyspec-{name}", v), (f"{_dest(name)} (ini)", ini)):
      bad = control_character(str(text)) if isinstance(text, (str, Path)) else None
      if bad: _refuse(f"{where} holds the control character {bad} [setting.value]")
    if v is None and isinstance(ini, str) and ini.strip(): v = ini_dir / ini.strip() if kind is Path and ini.strip() != "none" else ini.strip()
    if v is None:
      v = getattr(project, {"case-timeout": "timeout"}.get(name, name), None)   # (manifests are per backend there)
      if name == "backend" and v is not None: out["project"] = project.folder   # its command's paths are relative to it
    try: out[name] = None if v is None else kind(v)
    except ValueError: _refuse(f"--tinyspec-{name}: {v!r} is not a {kind.__name__}")
  if out["profile"] not in (None, "strict", "portable"): _refuse(f"--tinyspec-profile: {out['profile']!r} is neither strict nor portable")
  if out["case-timeout"] is not None and not out["case-timeout"] > 0: _refuse("--tinyspec-case-timeout: a positive number of seconds")
  config.stash[_SETTINGS] = out
  return out


def _runner(config):
  """The session's CaseRunner, started (capabilities read, manifest chosen) when the corpus
  is first collected; a backend that is unknown or cannot start ends the session."""
  if _RUNNER in config.stash: return config.stash[_RUNNER]
  from tinyspec.conformance.run.execute import CaseRunner, BackendUnavailable
  from tinyspec.conformance.corpus.manifest import ManifestError
  s = settings(config)
  try:
    r = CaseRunner(s["backend"] or "ref", timeout=s["case-timeout"] or 60.0, profile=s["profile"], project=s["project"])
    r.capabilities()
    r.use_manifest(s["manifest"], s["manifests"])
  except (KeyError, BackendUnavailable, ManifestError) as e:
    _refuse(str(e).strip('"'))
  config.stash[_RUNNER] = r
  config.add_cleanup(r.close)
  return r


@pytest.fixture(scope="session")
def conformance_runner(request):
  return _runner(request.config)


def pytest_generate_tests(metafunc):
  if "conformance_case" not in metafunc.fixturenames: return
  from tinyspec.conformance.corpus.cases import load_cases, CaseError, BrokenCase
  from tinyspec.conformance.run.selection import select, SelectionError
  cfg = metafunc.config
  s = settings(cfg)
  broken: list = []   # a malformed case folder is that case's error (its test fails); the others run
  try: cases = select(load_cases(s["cases"], broken) + [BrokenCase(cid, msg) for cid, msg in broken], None, s["case_ids"])
  except (CaseError, SelectionError) as e: _refuse(str(e))
  manifest = _runner(cfg).manifest
  params = []
  for c in cases:
    marks = [getattr(pytest.mark, CASE_ID)]
    out, why = (None, None) if isinstance(c, BrokenCase) else (manifest.excluded(c.id), manifest.reason(c.id))
    if out: marks.append(pytest.mark.skip(reason=f"excluded by the manifest: {out}"))
    elif why: marks.append(pytest.mark.xfail(reason=why, strict=True))
    params.append(pytest.param(c, id=c.id, marks=marks))
  metafunc.parametrize("conformance_case", params)


class _Tally:
  """The corpus's tests and how many ran (counted in the process that gets the reports: the
  controller under pytest-xdist); a session where none ran exits 5, not green."""

  def __init__(self):
    self.cases = self.ran = 0
    self.failed: list = []   # node ids of the corpus's failing tests

  def pytest_runtest_logreport(self, report):
    if CASE_ID not in report.keywords: return
    if report.when == "setup": self.cases += 1
    if report.when == "call" and (not report.skipped or hasattr(report, "wasxfail")): self.ran += 1
    if report.failed and report.nodeid not in self.failed: self.failed.append(report.nodeid)

  def none_ran(self) -> bool: return self.cases > 0 and self.ran == 0

  def pytest_sessionfinish(self, session, exitstatus):
    if self.none_ran() and exitstatus == pytest.ExitCode.OK: session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED

  def pytest_terminal_summary(self, terminalreporter, config):
    self._pasteable(terminalreporter, config)
    if self.none_ran():
      from tinyspec.conformance.run.runner import count
      terminalreporter.write_line(f"tinyspec conformance: none of the {count(self.cases, 'case')} ran (each unsupported by the backend "
                                  "or excluded by its manifest): exit 5", red=True)

  def _pasteable(self, tr, config, limit: int = 12):
    """The failing cases as node ids pytest takes back: a test collected from the installed
    package (`--pyargs tinyspec.conformance`) has a node id relative to the package, which
    pytest cannot find from here, so its `--pyargs` form is printed."""
    from tinyspec.files import printable
    lost = [n for n in self.failed if not (Path(config.rootpath) / n.split("::")[0]).exists()]
    if not lost: return
    tr.write_line("tinyspec conformance: run a failing case again with the same --tinyspec-* options and:")
    for n in lost[:limit]:
      file, test = n.split("::", 1)
      tr.write_line("  " + printable("pytest --pyargs " + shlex.quote(f"{__package__}.{Path(file).stem}::{test}")))
    if len(lost) > limit: tr.write_line(f"  ... and {len(lost) - limit} more (--tinyspec-case ID runs one by its case id)")
