"""The compile targets the tests run on: c always, opencl where an OpenCL device opens and
builds (the distribution's PoCL on a CPU; scripts/setup.sh installs it as root). Where none
can, the OpenCL tests skip with the runtime's own reason (what is missing, what to do)."""
from __future__ import annotations
import pytest


def _cl_unavailable() -> str | None:
  from tinyspec.backends import Unavailable
  try:
    from tinyspec.compiler.runtime.opencl import device as cl_device
    cl_device()
    return None
  except Unavailable as e:   # no platform, or no device that builds a kernel (compiler/runtime/opencl.py)
    return str(e)


CL_UNAVAILABLE = _cl_unavailable()
HAVE_CL = CL_UNAVAILABLE is None
needs_cl = pytest.mark.skipif(not HAVE_CL, reason=f"OpenCL unavailable: {CL_UNAVAILABLE}")
TARGETS = ["c", pytest.param("opencl", marks=needs_cl)]
