"""The compiled-program cache loads only what it wrote (issue 13, "the compiled-program
cache runs whatever it finds"): entries are checked against a signature kept apart from
them before dlopen, garbage is rebuilt, and a cache folder others may write is refused
(once, rule cache.unsafe) for a private temporary one."""
from __future__ import annotations
import json
import os
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hostile import console, neg_graph, write_json
from targets import needs_cl

EVIL = r'''
#include <stdio.h>
__attribute__((constructor)) static void planted(void) { FILE* f = fopen(MARK, "w"); if (f) { fputs("ran", f); fclose(f); } }
'''


def _run(tmp_path, cache, *extra, backend="c"):
  g = tmp_path / "g.json"
  if not g.exists(): write_json(g, neg_graph())
  x = tmp_path / "x.npy"; np.save(x, np.array([1.5, -2], np.float32))
  return console("run", g, "--backend", backend, "--input", f"buf0={x}", *extra, env={"TINYSPEC_CACHE": str(cache)})


def _entries(cache: Path, sub: str, suffix: str) -> list:
  return sorted((cache / sub).glob(f"*{suffix}"))


def test_a_planted_library_is_never_loaded(tmp_path):
  cache = tmp_path / "cache"
  assert _run(tmp_path, cache).returncode == 0
  (so,) = _entries(cache, "c", ".so")
  mark = tmp_path / "PLANTED_RAN"
  src = tmp_path / "evil.c"; src.write_text(EVIL.replace("MARK", json.dumps(str(mark))))
  subprocess.run(["cc", "-shared", "-fPIC", "-o", so, src], check=True)   # a valid library, at the very key the next run uses
  r = _run(tmp_path, cache)
  assert r.returncode == 0 and "out0: float32 [2]\n  [-1.5  2. ]" in r.stdout, r.stdout + r.stderr
  assert not mark.exists()                                              # its constructor never ran
  assert _run(tmp_path, cache).returncode == 0 and not mark.exists()      # and the entry was rebuilt


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "signature", "no-signature", "directory", "fifo"])
def test_a_damaged_entry_is_rebuilt(tmp_path, damage):
  cache = tmp_path / "cache"
  assert _run(tmp_path, cache).returncode == 0
  (so,) = _entries(cache, "c", ".so")
  sig = Path(str(so) + ".sig")
  if damage == "garbage": so.write_bytes(b"\x7fELF garbage" * 100)
  elif damage == "empty": so.write_bytes(b"")
  elif damage == "truncated": so.write_bytes(so.read_bytes()[:1000])
  elif damage == "signature": sig.write_text("0" * 64)
  elif damage == "no-signature": sig.unlink()
  elif damage == "directory": so.unlink(); so.mkdir()
  else: so.unlink(); os.mkfifo(so)
  r = _run(tmp_path, cache)
  assert r.returncode == 0 and "[-1.5  2. ]" in r.stdout, r.stdout + r.stderr


def test_a_cache_others_can_write_is_refused_once(tmp_path):
  cache = tmp_path / "shared"
  cache.mkdir(); os.chmod(cache, 0o777)
  code = ("import numpy as np; from tinyspec.compiler import compile_graph; from tinyspec.graph import Graph\n"
          f"g = Graph.load({str(write_json(tmp_path / 'g.json', neg_graph()))!r})\n"
          "for k in range(3): print(compile_graph(g, 'c').run({'buf0': np.ones(2, np.float32) * k})['out0'].tolist())\n")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "TINYSPEC_CACHE": str(cache)}, timeout=300)
  assert r.returncode == 0, r.stderr
  assert r.stdout.split("\n")[:3] == ["[-0.0, -0.0]", "[-1.0, -1.0]", "[-2.0, -2.0]"]
  assert r.stderr.count("[cache.unsafe]") == 1 and "writable by others (mode 777)" in r.stderr, r.stderr
  assert list(cache.iterdir()) == []   # nothing cached there


def test_a_subfolder_others_can_write_is_refused(tmp_path):
  cache = tmp_path / "cache"
  (cache / "c").mkdir(parents=True, mode=0o700); os.chmod(cache, 0o700); os.chmod(cache / "c", 0o775)
  r = _run(tmp_path, cache)
  assert r.returncode == 0 and "[cache.unsafe]" in r.stderr and "writable by its group" in r.stderr
  assert not _entries(cache, "c", ".so")


def test_new_cache_folders_are_private(tmp_path):
  cache = tmp_path / "new" / "cache"
  old = os.umask(0o002)   # a umask that would leave them group-writable
  try: assert _run(tmp_path, cache).returncode == 0
  finally: os.umask(old)
  for d in (cache, cache / "c"): assert (d.stat().st_mode & 0o777) == 0o700
  assert ((cache / ".key").stat().st_mode & 0o777) == 0o600


def test_a_beam_winner_that_this_cache_did_not_write_is_ignored(tmp_path, monkeypatch):
  """BEAM winners (OptOps) are signed entries too: a planted one is searched again."""
  from tinyspec.compiler import beam
  from tinyspec.compiler.runtime import cache as C
  monkeypatch.setenv("TINYSPEC_CACHE", str(tmp_path / "cache"))
  calls = []
  monkeypatch.setattr(beam, "search", lambda *a, **k: calls.append(1) or [])
  from tinyspec.graph import Graph
  from tinyspec.compiler import compile_graph
  g = Graph.loads(json.dumps(neg_graph((4096,))))
  compile_graph(g, "c", beam=2)
  assert calls == [1]
  (entry,) = (tmp_path / "cache" / "beam").glob("*.json")
  entry.write_text(json.dumps({"opts": [["SPLIT", 99, [7, "THREAD"]]]}))   # planted: would be refused as opt.axis
  compile_graph(g, "c", beam=2)
  assert calls == [1, 1]
  assert json.loads(C.fetch(entry))["opts"] == []   # searched again and stored, signed


@needs_cl
def test_an_opencl_binary_this_cache_did_not_write_is_rebuilt(tmp_path):
  cache = tmp_path / "cache"
  assert _run(tmp_path, cache, backend="opencl").returncode == 0
  bins = _entries(cache, "opencl", ".bin")
  assert bins
  for b in bins: b.write_bytes(b"garbage")
  r = _run(tmp_path, cache, backend="opencl")
  assert r.returncode == 0 and "[-1.5  2. ]" in r.stdout, r.stdout + r.stderr
