"""The case corpus as tests (see conformance/plugin.py): `pytest --pyargs tinyspec.conformance --tinyspec-backend=NAME`."""
import pytest
from tinyspec.conformance.corpus.cases import BrokenCase


def test_case(conformance_case, conformance_runner):
  if isinstance(conformance_case, BrokenCase): pytest.fail(f"error: {conformance_case.message}", pytrace=False)
  r = conformance_runner.run_one(conformance_case)
  if r.status == "unsupported": pytest.skip(r.message)
  if r.status != "pass": pytest.fail(f"{r.status}: {r.message}", pytrace=False)
