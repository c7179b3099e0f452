"""The program cache: keyed by source hash under $TINYSPEC_CACHE; a hit never calls the
compiler; PoCL's own cache lives in the same directory."""
from __future__ import annotations
import os
import subprocess
import numpy as np
import pytest
from tinyspec.uop import UOp
from tinyspec.compiler import compile_graph
from tinyspec.compiler.literals import shape_operand as S, const
from tinyspec.compiler.runtime import c as cruntime
from tinyspec.compiler.runtime.cache import cache_dir
from targets import needs_cl


def _graph(k: float):
  a = UOp("BUFFER", (S((5,)),), {"slot": 0, "dtype": "float32", "device": "CPU"})
  return [UOp("MUL", (a, const(k, "float32")))]


def test_c_cache_hit_does_not_compile(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYSPEC_CACHE", str(tmp_path))
  c = compile_graph(_graph(3.25), "c")
  c.executable()                                             # builds: one library in the cache
  libs = list((tmp_path / "c").glob("*.so"))
  assert len(libs) == 1
  mtime = libs[0].stat().st_mtime_ns
  def no_compiler(*a, **k): raise AssertionError("the compiler ran on a cache hit")
  monkeypatch.setattr(subprocess, "run", no_compiler)
  monkeypatch.setattr(cruntime, "_LIBS", {})                  # as a new process would: nothing loaded
  out = compile_graph(_graph(3.25), "c").run({"buf0": np.arange(5, dtype=np.float32)})
  assert out["out0"].tolist() == [0, 3.25, 6.5, 9.75, 13]
  assert libs[0].stat().st_mtime_ns == mtime
  # a different source is a different entry (and does need the compiler)
  monkeypatch.undo()
  monkeypatch.setenv("TINYSPEC_CACHE", str(tmp_path))
  compile_graph(_graph(4.5), "c").executable()
  assert len(list((tmp_path / "c").glob("*.so"))) == 2


def test_cache_dir_default_and_pocl(monkeypatch, tmp_path):
  monkeypatch.delenv("TINYSPEC_CACHE", raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  assert cache_dir() == tmp_path / ".cache" / "tinyspec"
  # PoCL's cache is pointed into the tinyspec cache before the platform is initialised
  import tinyspec.compiler.runtime.opencl  # noqa: F401
  pocl = os.environ.get("POCL_CACHE_DIR", "")
  assert pocl.endswith(os.path.join("tinyspec", "pocl")) or "TINYSPEC_CACHE" not in os.environ


@needs_cl
def test_opencl_programs_are_cached(tmp_path):
  c = compile_graph(_graph(2.0), "opencl")
  c.executable()
  assert any(cache_dir("opencl").iterdir())
  assert c.run({"buf0": np.arange(5, dtype=np.float32)})["out0"].tolist() == [0, 2, 4, 6, 8]


def test_build_timeout_kills_the_whole_compiler(tmp_path, monkeypatch):
  """A compiler run past its timeout is killed with its children (cc1 would otherwise go
  on for as long as it likes) and reported as BuildError; nothing is cached."""
  monkeypatch.setenv("TINYSPEC_CACHE", str(tmp_path))
  ks = compile_graph(_graph(7.5), "c").sources[0]
  # many copies of the kernel under new names: seconds of work for the compiler
  big = ks.source + "".join(ks.body.replace(f"void {ks.name}(", f"void {ks.name}_{n}(", 1) for n in range(2000))
  with pytest.raises(cruntime.BuildError, match="killed"):
    cruntime.build(big, timeout=0.2)
  assert not list((tmp_path / "c").glob("*.so"))
  import time
  time.sleep(0.3)
  left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
  assert not left, left
