"""Opening an OpenCL device that works, or saying so once (compiler/runtime/opencl.py).

The runtime takes the first device that builds and runs a trivial kernel, or the one
TINYSPEC_OPENCL_DEVICE names; where none can, every entry point refuses once, exit 2,
rule backend.unavailable, with what to do and no traceback. The hostile machine is made
for real: a child process whose only OpenCL platform is a PoCL that cannot build
(OCL_ICD_VENDORS: a folder holding just its ICD file; POCL_EXTRA_BUILD_FLAGS with an
option PoCL rejects, as the pip PoCL's LLVM rejects a CPU it does not know)."""
from __future__ import annotations
import os
import subprocess
import sys
from pathlib import Path
import pytest
from tinyspec.compiler.runtime import opencl as R
from targets import HAVE_CL, CL_UNAVAILABLE

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "conformance" / "cases" / "ADD" / "float32"


class _P:
  def __init__(self, name): self.name, self.version = name, f"OpenCL 3.0 {name}  Linux"


class _D:
  def __init__(self, name): self.name = name


def test_a_device_that_cannot_build_is_passed_over():
  broken, works = (_P("PoCL 3.0"), _D("pthread-znver5")), (_P("PoCL 3.1"), _D("pthread-skylake-avx512"))
  pick, failures = R.choose([broken, works], lambda d: "error: unknown target CPU 'generic'" if d is broken[1] else None)
  assert pick is works[1]
  assert failures == ["pthread-znver5 [OpenCL 3.0 PoCL 3.0]: error: unknown target CPU 'generic'"]
  pick, failures = R.choose([broken, broken], lambda d: "error: unknown target CPU 'generic'")
  assert pick is None and len(failures) == 1        # one ICD registered twice is said once


def test_the_first_error_line_of_a_build_log():
  log = ("clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: BUILD_PROGRAM_FAILURE\n"
         "Build on <pyopencl.Device 'pthread-AMD EPYC 9555' on 'Portable Computing Language'>:\n\n"
         "error: unknown target CPU 'generic'\nnote: valid target CPU values are: ...\n(options: -I /x)")
  assert R._first_error(log) == "error: unknown target CPU 'generic'"


def _pocl_library() -> str | None:
  """A PoCL ICD library on this machine: the distribution's, else the pip one."""
  icd = Path("/etc/OpenCL/vendors/pocl.icd")
  if icd.is_file():
    lib = icd.read_text().strip()
    for d in ("", "/usr/lib/x86_64-linux-gnu/", "/usr/lib/"):
      if Path(d + lib).is_file(): return d + lib
  try:
    import pyopencl
    libs = sorted((Path(pyopencl.__file__).parent / ".libs").glob("libpocl*.so*"))
    return str(libs[0]) if libs else None
  except ImportError:
    return None


@pytest.fixture(scope="module")
def broken_env(tmp_path_factory):
  lib = _pocl_library()
  if lib is None: pytest.skip("no PoCL library to make a PoCL that cannot build from")
  d = tmp_path_factory.mktemp("icd")
  (d / "only-pocl.icd").write_text(lib + "\n")
  env = {**os.environ, "OCL_ICD_VENDORS": str(d), "POCL_EXTRA_BUILD_FLAGS": "-mcpu=no-such-cpu",
         "TINYSPEC_CACHE": str(tmp_path_factory.mktemp("cache"))}
  env.pop("TINYSPEC_OPENCL_DEVICE", None)
  return env


def _tinyspec(env, *args, cwd=None):
  return subprocess.run([sys.executable, "-m", "tinyspec", *args], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


def _refused_once(p, head="no OpenCL device here can build a kernel"):
  out = p.stdout + p.stderr
  assert p.returncode == 2, out
  assert "Traceback" not in out
  assert head in out and "[backend.unavailable]" in out
  assert "apt-get install pocl-opencl-icd" in out and "TINYSPEC_OPENCL_DEVICE" in out
  assert out.count("[backend.unavailable]") == 1, out       # once, not once per case
  assert len(out.splitlines()) <= 8, out


@pytest.mark.parametrize("cmd", [
  ["conformance", "--backend", "opencl", "--workers", "2"],
  ["run", str(CASE / "graph.json"), "--backend", "opencl", "--input", f"buf0={CASE / 'in.buf0.npy'}", "--input", f"buf1={CASE / 'in.buf1.npy'}"],
  ["compile", str(CASE / "graph.json"), "--target", "opencl", "--build"],
  ["fuzz", "--backend", "opencl", "--examples", "5"],
], ids=["conformance", "run", "compile-build", "fuzz"])
def test_every_entry_point_refuses_once_where_no_device_builds(cmd, broken_env, tmp_path):
  _refused_once(_tinyspec(broken_env, *cmd, cwd=tmp_path))
  assert list(tmp_path.iterdir()) == []        # nothing written (fuzz's default --out included)


def test_the_python_api_raises_the_same_refusal(broken_env):
  code = ("from tinyspec.tensor import Tensor\nimport numpy as np\n"
          "from tinyspec.backends import Unavailable\n"
          "try: (Tensor(np.ones(3, np.float32)) + 1).numpy(backend='opencl')\n"
          "except Unavailable as e: print('REFUSED', e.rule); print(e)\n")
  p = subprocess.run([sys.executable, "-c", code], env=broken_env, capture_output=True, text=True, timeout=300)
  assert p.stdout.startswith("REFUSED backend.unavailable"), p.stdout + p.stderr
  assert "Traceback" not in p.stderr


def test_a_named_device_that_cannot_build_is_refused(broken_env):
  env = {**broken_env, "TINYSPEC_OPENCL_DEVICE": "pthread"}
  _refused_once(_tinyspec(env, "compile", str(CASE / "graph.json"), "--target", "opencl", "--build"),
                head="TINYSPEC_OPENCL_DEVICE=pthread: the device cannot build a kernel")


@pytest.mark.skipif(not HAVE_CL, reason=f"OpenCL unavailable: {CL_UNAVAILABLE}")
def test_a_named_device_that_is_not_here_is_refused_with_the_list():
  env = {**os.environ, "TINYSPEC_OPENCL_DEVICE": "no-such-gpu"}
  p = _tinyspec(env, "compile", str(CASE / "graph.json"), "--target", "opencl", "--build")
  out = p.stdout + p.stderr
  assert p.returncode == 2 and "Traceback" not in out
  assert "TINYSPEC_OPENCL_DEVICE=no-such-gpu: no device matches" in out and "[backend.unavailable]" in out


def test_backends_lists_what_each_needs(broken_env):
  import json
  p = _tinyspec({**broken_env, "CC": "no-such-cc"}, "backends", "--json")
  assert p.returncode == 0, p.stderr
  rows = {r["backend"]: r for r in json.loads(p.stdout)["backends"]}
  assert {"ref", "c", "opencl", "tinygrad"} <= set(rows)
  assert rows["opencl"]["status"] == "unavailable" and "[backend.unavailable]" in rows["opencl"]["why"]
  assert any("cannot build" in line for line in rows["opencl"]["details"])
  assert rows["c"]["status"] == "unavailable" and "no-such-cc" in rows["c"]["why"]
  assert rows["ref"]["status"] == "ok"
  p = _tinyspec(os.environ, "backends")
  assert p.returncode == 0 and "Traceback" not in p.stderr
  assert p.stdout.splitlines()[0].startswith("c ")


def test_no_c_compiler_is_refused_once(tmp_path):
  p = _tinyspec({**os.environ, "CC": "no-such-cc"}, "conformance", "--backend", "c", cwd=tmp_path)
  out = p.stdout + p.stderr
  assert p.returncode == 2 and "Traceback" not in out and out.count("no-such-cc") == 1, out


def test_the_pytest_plugin_refuses_once(broken_env, tmp_path):
  p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "tinyspec.conformance",
                      "--tinyspec-backend=opencl", "-q"], env=broken_env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
  out = p.stdout + p.stderr
  assert p.returncode == 2, out[-3000:]
  said = out.split("short test summary info")[0]   # (pytest's own summary repeats each error's first lines)
  assert said.count("[backend.unavailable]") == 1 and "apt-get install pocl-opencl-icd" in said, out[-3000:]
  assert "the backend cannot start (the first test's error says why): exit 2" in said
  assert "Traceback" not in out and " passed" not in out and " failed" not in out
