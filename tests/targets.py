"""The compile targets the tests run on: c always, opencl where an OpenCL device opens
(PoCL on a CPU; skipped with a reason elsewhere)."""
from __future__ import annotations
import pytest


def _have_cl() -> bool:
  try:
    from tinyspec.compiler.runtime.opencl import device as cl_device
    cl_device()
    return True
  except Exception:   # no OpenCL platform on this machine
    return False


HAVE_CL = _have_cl()
needs_cl = pytest.mark.skipif(not HAVE_CL, reason="no OpenCL device")
TARGETS = ["c", pytest.param("opencl", marks=needs_cl)]
