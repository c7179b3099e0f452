"""The pytest plugin of the conformance suite: run the case corpus as tests.

  pytest --pyargs conformance --backend=c [--cases=DIR] [--case-timeout=S] [-n 4]

One test per case (conformance/test_cases.py); each pytest process (each pytest-xdist
worker) runs the backend in one worker process of its own, so a crash fails one test.
Cases the backend's capabilities exclude are skipped; the backend's manifest
(conformance/manifests/<backend>.yaml) marks its entries xfail(strict=True).
"""
from __future__ import annotations
import pytest


def pytest_addoption(parser):
  g = parser.getgroup("tinyspec conformance")
  g.addoption("--backend", default="ref", help="the backend to test: a registered name, cmd:COMMAND, or an executable (default ref)")
  g.addoption("--cases", default=None, help="the case corpus folder (default conformance/cases)")
  g.addoption("--case-timeout", type=float, default=60.0, help="seconds per case before it fails as a hang (default 60)")
  g.addoption("--manifest", default=None, help="expected failures (default conformance/manifests/<backend>.yaml)")


@pytest.fixture(scope="session")
def conformance_runner(request):
  from conformance.execute import CaseRunner, BackendUnavailable
  try:
    r = CaseRunner(request.config.getoption("--backend"), timeout=request.config.getoption("--case-timeout"))
    r.capabilities()
  except (KeyError, BackendUnavailable) as e:
    pytest.exit(f"tinyspec conformance: {e}", returncode=2)
  yield r
  r.close()


def pytest_generate_tests(metafunc):
  if "conformance_case" not in metafunc.fixturenames: return
  from conformance.corpus import load_cases
  from conformance.manifest import load_manifest
  cfg = metafunc.config
  cases = load_cases(cfg.getoption("--cases"))
  name = _backend_name(cfg.getoption("--backend"))
  manifest = load_manifest(name, cfg.getoption("--manifest"))
  params = []
  for c in cases:
    why = manifest.reason(c.id)
    marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
    params.append(pytest.param(c, id=c.id, marks=marks))
  metafunc.parametrize("conformance_case", params)


def _backend_name(spec: str) -> str:
  """The name the manifest goes by: a registered name as is; an external backend's own
  name from its hello (asked once)."""
  from conformance.execute import resolve_backend, CaseRunner
  s = resolve_backend(spec)
  if s.python: return s.label
  r = CaseRunner(spec)
  try: r.capabilities(); return r.name
  except Exception: return s.label
  finally: r.close()
