"""Nothing is written outside the program cache (issue 32, "Oclgrind's ICD files follow a
planted link"): a symbolic link planted at any path the cache writes (a C library, an
OpenCL binary, a BEAM winner, a signature, the signing key, Oclgrind's ICD files and its
log) is replaced, never followed, whether its target exists or not; a folder of the cache
that is a link is refused (rule cache.unsafe) for the private temporary cache."""
from __future__ import annotations
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hostile import console, neg_graph, write_json
from targets import needs_cl

PLANTED = "planted: must stay as it is\n"


def _run(tmp_path, cache, backend="c", env=None):
  g = tmp_path / "g.json"
  if not g.exists(): write_json(g, neg_graph())
  x = tmp_path / "x.npy"; np.save(x, np.array([1.5, -2], np.float32))
  return console("run", g, "--backend", backend, "--input", f"buf0={x}", env={"TINYSPEC_CACHE": str(cache), **(env or {})})


def plant_links(cache: Path, outside: Path, dangling: bool) -> dict:
  """Every file under cache replaced by a link to a file of `outside` (holding PLANTED, or
  none: a dangling link). Returns what `outside` must hold afterwards."""
  outside.mkdir(exist_ok=True)
  want = {}
  for f in sorted(p for p in cache.rglob("*") if p.is_file() and not p.is_symlink()):
    target = outside / f.relative_to(cache).as_posix().replace("/", "__")
    if not dangling:
      target.write_text(PLANTED)
      want[target.name] = PLANTED
    f.unlink()
    f.symlink_to(target)
  assert want or dangling
  return want


def held(outside: Path) -> dict:
  return {p.name: p.read_text() for p in outside.iterdir()}


@pytest.mark.parametrize("dangling", [False, True])
def test_links_at_every_c_entry_are_replaced(tmp_path, dangling):
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  assert _run(tmp_path, cache).returncode == 0
  names = {p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file()}
  assert ".key" in names and any(n.endswith(".so") for n in names) and any(n.endswith(".so.sig") for n in names)
  want = plant_links(cache, outside, dangling)
  r = _run(tmp_path, cache)
  assert r.returncode == 0 and "[-1.5  2. ]" in r.stdout, r.stdout + r.stderr
  assert held(outside) == want                                   # nothing written through a link
  assert not [p for p in cache.rglob("*") if p.is_symlink()]     # each entry rewritten in place


@pytest.mark.parametrize("sub", ["c", "beam", "icd", "pocl", "opencl"])
def test_a_cache_folder_that_is_a_link_is_refused(tmp_path, sub):
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  cache.mkdir(mode=0o700); outside.mkdir(mode=0o700)
  (cache / sub).symlink_to(outside, target_is_directory=True)
  code = ("from tinyspec.compiler.runtime.cache import cache_dir; "
          f"d = cache_dir({sub!r}); print(d); (d / 'x').write_text('x')")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                     env={**os.environ, "TINYSPEC_CACHE": str(cache)})
  assert r.returncode == 0, r.stderr
  assert "[cache.unsafe]" in r.stderr and "a symbolic link" in r.stderr, r.stderr
  assert list(outside.iterdir()) == [] and not r.stdout.startswith(str(cache))


def test_links_at_oclgrinds_icd_files_and_log_are_replaced(tmp_path, monkeypatch):
  """TINYSPEC_OPENCL_DEVICE=Oclgrind writes its ICD files (its own and a copy of each system
  one) and makes its log in the cache: links planted at every one of those names (the log's
  is the process id) are replaced, never followed. (Oclgrind's library faked: no simulator
  needed.)"""
  from tinyspec.compiler.runtime import opencl
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  icd = cache / "icd"
  icd.mkdir(parents=True, mode=0o700); os.chmod(cache, 0o700); outside.mkdir()
  for k in ("OCL_ICD_VENDORS", "OCLGRIND_LOG", "OCLGRIND_DATA_RACES"): monkeypatch.delenv(k, raising=False)
  monkeypatch.setenv("TINYSPEC_CACHE", str(cache))
  monkeypatch.setenv("TINYSPEC_OPENCL_DEVICE", "Oclgrind")
  monkeypatch.setattr(opencl, "oclgrind_library", lambda: "/nonexistent/liboclgrind-rt-icd.so")
  monkeypatch.setattr(os, "getpid", lambda: 4242)
  names = ["tinyspec-oclgrind.icd", "oclgrind-4242.log"] + [f.name for f in Path("/etc/OpenCL/vendors").glob("*.icd")]
  for k, name in enumerate(names):
    target = outside / name
    if k % 2 == 0: target.write_text(PLANTED)
    (icd / name).symlink_to(target)
  opencl._register_oclgrind()
  assert held(outside) == {n: PLANTED for k, n in enumerate(names) if k % 2 == 0}
  assert not [p for p in icd.iterdir() if p.is_symlink()]
  assert (icd / "tinyspec-oclgrind.icd").read_text() == "/nonexistent/liboclgrind-rt-icd.so\n"
  assert os.environ["OCL_ICD_VENDORS"] == str(icd) and os.environ["OCLGRIND_LOG"] == str(icd / "oclgrind-4242.log")


@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="Oclgrind is not installed (Debian/Ubuntu: apt-get install oclgrind)")
def test_tinyspec_backends_on_oclgrind_writes_nothing_outside_the_cache(tmp_path):
  """The issue's reproduction: `tinyspec backends` with links at the ICD files' names."""
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  (cache / "icd").mkdir(parents=True, mode=0o700); os.chmod(cache, 0o700); outside.mkdir()
  for name in ["tinyspec-oclgrind.icd"] + [f.name for f in Path("/etc/OpenCL/vendors").glob("*.icd")]:
    (cache / "icd" / name).symlink_to(outside / name)
  r = console("backends", env={"TINYSPEC_CACHE": str(cache), "TINYSPEC_OPENCL_DEVICE": "Oclgrind", "OCL_ICD_VENDORS": ""})
  assert r.returncode == 0, r.stdout + r.stderr
  assert list(outside.iterdir()) == []


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_a_beam_winner_is_replaced(tmp_path, monkeypatch, dangling):
  from tinyspec.compiler import beam, compile_graph
  from tinyspec.graph import Graph
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  monkeypatch.setenv("TINYSPEC_CACHE", str(cache))
  monkeypatch.setattr(beam, "search", lambda *a, **k: [])
  g = Graph.loads(json.dumps(neg_graph((4096,))))
  compile_graph(g, "c", beam=2)
  want = plant_links(cache / "beam", outside, dangling)
  compile_graph(g, "c", beam=2)
  assert held(outside) == want and not [p for p in (cache / "beam").iterdir() if p.is_symlink()]


@needs_cl
def test_links_at_opencl_binaries_are_replaced(tmp_path):
  cache, outside = tmp_path / "cache", tmp_path / "outside"
  assert _run(tmp_path, cache, backend="opencl").returncode == 0
  want = plant_links(cache / "opencl", outside, False)
  r = _run(tmp_path, cache, backend="opencl")
  assert r.returncode == 0 and "[-1.5  2. ]" in r.stdout, r.stdout + r.stderr
  assert held(outside) == want and not [p for p in (cache / "opencl").iterdir() if p.is_symlink()]
