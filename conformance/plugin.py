"""The pytest plugin of the conformance suite: run the case corpus as tests.

  pytest --pyargs tinyspec.conformance --backend=c [--cases=DIR] [--case-timeout=S] [-n 4]

Installed as a `pytest11` entry point, so it works from any directory. Each option also
has a `--tinyspec-` spelling (`--tinyspec-backend=c`), which is the only one added when
another plugin already owns the short name.

One test per case (conformance/test_cases.py); each pytest process (each pytest-xdist
worker) runs the backend in one worker process of its own, so a crash fails one test.
Cases the backend's capabilities exclude are skipped; the backend's manifest
(conformance/manifests/<backend>.yaml) marks its entries xfail(strict=True).
"""
from __future__ import annotations
import pytest


OPTIONS = {   # short name -> (keyword arguments of addoption)
  "backend": dict(default="ref", help="the backend to test: a registered name, cmd:COMMAND, or an executable (default ref)"),
  "cases": dict(default=None, help="the case corpus folder (default: the corpus shipped with tinyspec)"),
  "case-timeout": dict(type=float, default=60.0, help="seconds per case before it fails as a hang (default 60)"),
  "manifest": dict(default=None, help="expected failures (default: the shipped manifests/<backend>.yaml)"),
}


def pytest_addoption(parser):
  g = parser.getgroup("tinyspec conformance")
  for name, kw in OPTIONS.items():
    dest = "tinyspec_" + name.replace("-", "_")
    try: g.addoption(f"--{name}", f"--tinyspec-{name}", dest=dest, **kw)
    except ValueError: g.addoption(f"--tinyspec-{name}", dest=dest, **kw)   # the short name is another plugin's


def _opt(config, name: str):
  return config.getoption("tinyspec_" + name.replace("-", "_"))


def pytest_configure(config):
  """A backend no one registered is a usage error, said before anything is collected."""
  spec = _opt(config, "backend")
  if spec == OPTIONS["backend"]["default"]: return    # (another project's pytest run pays nothing)
  from tinyspec.conformance.execute import resolve_backend
  try: resolve_backend(spec)
  except KeyError as e: raise pytest.UsageError(f"tinyspec conformance: {e.args[0]}") from None


@pytest.fixture(scope="session")
def conformance_runner(request):
  from tinyspec.conformance.execute import CaseRunner, BackendUnavailable
  try:
    r = CaseRunner(_opt(request.config, "backend"), timeout=_opt(request.config, "case-timeout"))
    r.capabilities()
  except (KeyError, BackendUnavailable) as e:
    pytest.exit(f"tinyspec conformance: {e}", returncode=2)
  yield r
  r.close()


def pytest_generate_tests(metafunc):
  if "conformance_case" not in metafunc.fixturenames: return
  from tinyspec.conformance.corpus import load_cases
  from tinyspec.conformance.manifest import load_manifest
  cfg = metafunc.config
  cases = load_cases(_opt(cfg, "cases"))
  name = _backend_name(_opt(cfg, "backend"))
  manifest = load_manifest(name, _opt(cfg, "manifest"))
  params = []
  for c in cases:
    why = manifest.reason(c.id)
    marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
    params.append(pytest.param(c, id=c.id, marks=marks))
  metafunc.parametrize("conformance_case", params)


def _backend_name(spec: str) -> str:
  """The name the manifest goes by: a registered name, or an external backend's own name
  from its hello, with the configuration label its capabilities give (asked once)."""
  from tinyspec.conformance.execute import resolve_backend, CaseRunner
  s = resolve_backend(spec)
  r = CaseRunner(spec)
  try: r.capabilities(); return r.manifest_name
  except Exception: return s.label
  finally: r.close()
