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

One test per case. Collecting is cheap, so that each pytest-xdist worker (which collects
everything) pays little for it: the cases are listed by id (corpus/cases.py list_cases),
each read when its test is set up, and the backend is started when the process's first test
is set up, in a process of its own that serves every test of that pytest process (a crash
fails one test). Cases the backend's capabilities do not cover are skipped; the backend's
manifest (conformance/corpus/manifest.py, known once the backend has said its name) marks its
expected failures xfail(strict=True) and its exclusions skip, at setup. A failure is
`pytest.fail(message, pytrace=False)`: the runner's message (differing elements, operands,
profile, repro command), no traceback. An unknown backend, a manifest or corpus that
cannot be read, or a setting that cannot be used is the collection's error, its message
alone (pytest exits 2); a backend that cannot start is the error of the first test (of each
pytest-xdist worker), its message alone, the others are skipped, and the session exits 2. A session in which no case ran (all skipped) exits 5, as pytest does
when nothing is collected.
"""
from __future__ import annotations
import shlex
from pathlib import Path
import pytest
from tinyspec.files import printable, control_character
from tinyspec import environment
from tinyspec.conformance.run.settings import load_settings, SettingsError
from tinyspec.conformance.corpus.manifest import ManifestError, find_manifest
from tinyspec.conformance.corpus.cases import load_case, CaseError, list_cases, CASES_DIR
from tinyspec.conformance.run.selection import select, SelectionError
from tinyspec.conformance.run.runner import count

OPTIONS = {   # name -> (help, default, type): --tinyspec-NAME on the command line, tinyspec_NAME in the ini file
  "backend": ("the backend to test: a registered name, cmd:COMMAND, or an executable (default ref)", None, str),
  "cases": ("the case corpus folder (default: the corpus shipped with tinyspec)", None, Path),
  "manifest": ("expected failures and exclusions; none: no manifest (default: [tool.tinyspec.manifests], the backend's own, the shipped one)", None, Path),
  "case-timeout": ("seconds per case before it fails as a hang (default 60)", None, float),
  "profile": ("judge by the canonical results (strict) or any allowed one (portable); default: the backend's", None, str),
}
CASE_ID = "tinyspec_case"   # the marker on each corpus test (how the session's end finds them, over pytest-xdist too)
UNAVAILABLE = "tinyspec_unavailable"   # the user property of the test whose setup found the backend cannot start


def pytest_addoption(parser):
  g = parser.getgroup("tinyspec", "tinyspec conformance (pytest --pyargs tinyspec.conformance)")
  for name, (help, default, _) in OPTIONS.items():
    g.addoption(f"--tinyspec-{name}", dest=_dest(name), default=default, metavar=name.split("-")[-1].upper(), help=help)
    parser.addini(_dest(name), help=f"tinyspec conformance: {help}", default="")
  g.addoption("--tinyspec-case", dest="tinyspec_case_ids", action="append", metavar="ID", default=None,
              help="run exactly the case ID (repeatable)")


def pytest_ignore_collect(collection_path, config):
  """`--pyargs tinyspec.conformance` walks the package: only its test_cases.py holds tests,
  and the corpus folders hold thousands of files pytest would otherwise look at."""
  here = Path(__file__).resolve().parent
  p = Path(collection_path)
  if p != here and p.is_relative_to(here) and p != here / "test_cases.py": return True
  return None


def pytest_configure(config):
  config.addinivalue_line("markers", f"{CASE_ID}: a case of the tinyspec conformance corpus")
  config.pluginmanager.register(_Tally(), "tinyspec-tally")


def _dest(name: str) -> str: return "tinyspec_" + name.replace("-", "_")


_SETTINGS = pytest.StashKey[dict]()
_RUNNER = pytest.StashKey[object]()
_BROKEN = pytest.StashKey[list]()   # [why the backend cannot start, whether a test has said it]


def _refuse(msg: str):
  """A setting that cannot be used: the corpus's collection error, its message alone (no
  traceback); pytest stops before running anything (exit 2, as `tinyspec conformance`)."""
  raise pytest.Collector.CollectError(printable(f"tinyspec conformance: {msg}")) from None


def settings(config) -> dict:
  """The settings (name -> value; None where unset) from the command line, the ini file and
  [tool.tinyspec], read once; one that cannot be used stops the collection (_refuse)."""
  if _SETTINGS in config.stash: return config.stash[_SETTINGS]
  try: environment.check_all()
  except environment.EnvironmentValue as e: _refuse(str(e))
  try: project = load_settings(config.invocation_params.dir)
  except SettingsError as e: _refuse(str(e))
  ini_dir = Path(config.inipath).parent if config.inipath else Path(config.invocation_params.dir)
  out = {"manifests": project.manifests, "case_ids": config.getoption("tinyspec_case_ids"), "project": None, "ini_backend": False}
  for name, (_, _default, kind) in OPTIONS.items():
    v = config.getoption(_dest(name))
    ini = config.getini(_dest(name))
    for where, text in ((f"--tinyspec-{name}", v), (f"{_dest(name)} (ini)", ini)):
      bad = control_character(str(text)) if isinstance(text, (str, Path)) else None
      if bad: _refuse(f"{where} holds the control character {bad} [setting.value]")
    if v is None and isinstance(ini, str) and ini.strip():
      v = ini_dir / ini.strip() if kind is Path and ini.strip() != "none" else ini.strip()
      if name == "backend": out["project"], out["ini_backend"] = ini_dir, True   # cmd:./backend: relative to the ini file
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
  """The session's CaseRunner, started (capabilities read, manifest chosen) when the first
  test is set up; None where the backend cannot start or its manifest cannot be read
  (config.stash[_BROKEN] says why)."""
  from tinyspec.conformance.run.execute import CaseRunner, BackendUnavailable  # noqa: PLC0415 (start-up time: every pytest run loads this plugin; the runner loads with the corpus)
  if _RUNNER in config.stash: return config.stash[_RUNNER]
  if _BROKEN in config.stash: return None
  s = settings(config)
  try:
    r = CaseRunner(s["backend"] or "ref", timeout=s["case-timeout"] or 60.0, profile=s["profile"], project=s["project"])
    if s["ini_backend"]:   # a repro command names it as it runs from anywhere (`tinyspec run` reads [tool.tinyspec], not the ini)
      r.backend_arg = s["backend"] if r.spec.python else "cmd:" + shlex.join(r.spec.command)
    config.add_cleanup(r.close)
    r.capabilities()
    r.use_manifest(s["manifest"], s["manifests"])
  except (KeyError, BackendUnavailable, ManifestError) as e:
    config.stash[_BROKEN] = [printable(f"tinyspec conformance: {str(e).strip(chr(34))}"), False]
    return None
  config.stash[_RUNNER] = r
  return r


@pytest.fixture(scope="session")
def conformance_runner(request):
  return _runner(request.config)


@pytest.fixture
def conformance_case(request, conformance_runner):
  """The case of this test, read now; its manifest entry applied (skip, or xfail(strict))."""
  broken = request.config.stash.get(_BROKEN, None)
  if broken is not None:   # said once (per process), the other tests not run
    if broken[1]: pytest.skip("not run: the backend cannot start (the first test's error says why)")
    broken[1] = True
    request.node.user_properties.append((UNAVAILABLE, broken[0]))
    pytest.fail(broken[0], pytrace=False)
  root, folder = request.param
  try: case, broken_case = load_case(root, folder), None
  except CaseError as e: case, broken_case = None, str(e)
  if broken_case is not None: pytest.fail(broken_case, pytrace=False)   # (outside the except: no chained report)
  m = conformance_runner.manifest
  out, why = m.excluded(case.id), m.reason(case.id)
  if out: pytest.skip(f"excluded by the manifest: {out}")
  if why: request.node.add_marker(pytest.mark.xfail(reason=why, strict=True))
  return case


def pytest_generate_tests(metafunc):
  if "conformance_case" not in metafunc.fixturenames: return
  from tinyspec.conformance.run.execute import resolve_backend  # noqa: PLC0415 (start-up time: every pytest run loads this plugin; the runner loads with the corpus)
  s = settings(metafunc.config)
  try:   # what can be checked without starting the backend
    resolve_backend(s["backend"] or "ref", s["project"])
    if s["manifest"] is not None: find_manifest("", s["manifest"])
    root = s["cases"] if s["cases"] is not None else CASES_DIR
    listed = select([_Listed(cid, folder) for cid, folder in list_cases(root)], None, s["case_ids"])
  except KeyError as e: _refuse(str(e).strip('"'))
  except (CaseError, SelectionError, ManifestError) as e: _refuse(str(e))
  mark = getattr(pytest.mark, CASE_ID)
  metafunc.parametrize("conformance_case", [pytest.param((root, c.folder), id=c.id, marks=mark) for c in listed], indirect=True)


class _Listed:
  """A case by its id and folder (what selection and a test's id need)."""
  __slots__ = ("id", "folder")
  def __init__(self, cid: str, folder: str): self.id, self.folder = cid, folder


class _Tally:
  """The corpus's tests and how many ran (counted in the process that gets the reports: the
  controller under pytest-xdist); a session where none ran exits 5, not green."""

  def __init__(self):
    self.cases = self.ran = 0
    self.failed: list = []   # node ids of the corpus's failing tests
    self.unavailable = None  # why the backend cannot start, where it could not

  def pytest_runtest_logreport(self, report):
    if CASE_ID not in report.keywords: return
    self.unavailable = self.unavailable or next((v for k, v in report.user_properties if k == UNAVAILABLE), None)
    if report.when == "setup": self.cases += 1
    if report.when == "call" and (not report.skipped or hasattr(report, "wasxfail")): self.ran += 1
    if report.failed and report.nodeid not in self.failed: self.failed.append(report.nodeid)

  def none_ran(self) -> bool: return self.cases > 0 and self.ran == 0

  def pytest_sessionfinish(self, session, exitstatus):
    if self.unavailable: session.exitstatus = pytest.ExitCode.INTERRUPTED   # (2, as a setting that cannot be used stops the collection)
    elif self.none_ran() and exitstatus == pytest.ExitCode.OK: session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED

  def pytest_terminal_summary(self, terminalreporter, config):
    if self.unavailable:
      terminalreporter.write_line("tinyspec conformance: the backend cannot start (the first test's error says why): exit 2", red=True)
      return
    self._pasteable(terminalreporter, config)
    if self.none_ran():
      terminalreporter.write_line(f"tinyspec conformance: none of the {count(self.cases, 'case')} ran (each unsupported by the backend "
                                  "or excluded by its manifest): exit 5", red=True)

  def _pasteable(self, tr, config, limit: int = 12):
    """The failing cases as node ids pytest takes back: a test collected from the installed
    package (`--pyargs tinyspec.conformance`) has a node id relative to the package, which
    pytest cannot find from here, so its `--pyargs` form is printed."""
    lost = [n for n in self.failed if not (Path(config.rootpath) / n.split("::")[0]).exists()]
    if not lost: return
    tr.write_line("tinyspec conformance: run a failing case again with the same --tinyspec-* options and:")
    for n in lost[:limit]:
      file, test = n.split("::", 1)
      tr.write_line("  " + printable("pytest --pyargs " + shlex.quote(f"{__package__}.{Path(file).stem}::{test}")))
    if len(lost) > limit: tr.write_line(f"  ... and {len(lost) - limit} more (--tinyspec-case ID runs one by its case id)")
