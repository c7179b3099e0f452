"""The `tinygrad` conformance backend (interop/tinygrad_backend.py) and its manifests.

Skipped without tinygrad. Runs tinygrad's CPU device when clang is installed, else its
PYTHON emulator (TINYSPEC_TINYGRAD_DEVICE). The whole corpus is `tinyspec conformance
--backend tinygrad` (about 80 s on 2 cores); here a few cases per level. The fallback
without clang is checked in a subprocess whose PATH has no clang, on any machine; only the
tests of tinygrad's CPU device itself skip without clang.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest

os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
os.environ.setdefault("TINYSPEC_TINYGRAD_DEVICE", os.environ["DEV"])
pytest.importorskip("tinygrad")

from tinyspec.graph import Graph, Node   # noqa: E402
from tinyspec.backends import get_backend, backend_names   # noqa: E402
from tinyspec.interop.tinygrad_backend import TinygradBackend, Refused   # noqa: E402
from tinyspec.refimpl import evaluate   # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def backend():
  return TinygradBackend()


def _cases(ids):
  from tinyspec.conformance.corpus.cases import load_cases
  by_id = {c.id: c for c in load_cases()}
  missing = [i for i in ids if i not in by_id]
  if missing: pytest.skip(f"corpus has no case {missing} (regenerated?)")
  return [by_id[i] for i in ids]


def test_registered_through_the_entry_point():
  assert "tinygrad" in backend_names()
  assert isinstance(get_backend("tinygrad"), TinygradBackend)


def test_capabilities(backend):
  from tinyspec.interop.tinygrad_backend import unsupported
  caps = backend.capabilities()
  assert {"tensor", "kernel"} <= set(caps.ops["ADD"])
  assert "RANGE" in caps.ops and caps.ops["RANGE"] == {"kernel"}
  assert caps.profile == "portable" and caps.label == backend.device and caps.decomposed   # manifests/tinygrad-<DEVICE>.yaml
  assert "BUFFER_VIEW" not in caps.ops                  # no device of tinygrad has it (interop/tinygrad_map.yaml)
  assert ("SPECIAL" in caps.ops) == (backend.device != "CPU")   # tinygrad's CPU renderer has no work-item index
  assert set(unsupported("CPU")) == {"BUFFER_VIEW", "MULACC", "SPECIAL"} and "SPECIAL" not in unsupported("PYTHON")
  assert "float32" in caps.dtypes and "index" in caps.dtypes and "void" not in caps.dtypes


CASES = ["ADD/int8-broadcast", "WHERE/float32", "RESHAPE/float32", "PAD/int32", "FLIP/uint8", "REDUCE/float32",
         "REDUCE/int32-kernel", "INDEX/float32-kernel-gated", "STORE/float32", "CALL/float32", "STACK/int16",
         "CAST/int8", "BITCAST/float32"]


@pytest.mark.parametrize("cid", CASES)
def test_corpus_cases_pass(backend, cid):
  from tinyspec.conformance.corpus.cases import to_disk
  from tinyspec.conformance.run.execute import judge_positive
  case, = _cases([cid])
  outs = backend.run(Graph.load(case.graph), case.load_inputs())
  outs = {k: to_disk(v, case.outputs[k].dtype) if k in case.outputs else v for k, v in outs.items()}
  assert judge_positive(case, outs, True, "portable") is None


def test_invalid_graph_is_refused_with_the_rule():
  g = Graph([Node("CONST", (), {"value": 1, "dtype": "int32"}), Node("CONST", (), {"value": 1.0, "dtype": "float32"}),
             Node("ADD", [0, 1])])
  with pytest.raises(Refused) as e:
    TinygradBackend().run(g, {})
  assert e.value.rule == "dtype.match"


def test_kernel_graph_runs_as_a_tinygrad_kernel(backend):
  """out[i] = x[i] + x[i+2] where i+2 < 4 (a gated read), as the reference evaluates it."""
  N = lambda op, src=(), arg=None: Node(op, src, arg)   # noqa: E731
  g = Graph([N("VCONST", arg={"values": [4], "dtype": "index"}), N("PARAM", [0], {"slot": 0, "dtype": "float32"}),
             N("PARAM", [0], {"slot": 1, "dtype": "float32"}), N("CONST", arg={"value": 4, "dtype": "index"}),
             N("RANGE", [3], {"id": 0, "type": "LOOP"}), N("INDEX", [2, 4]), N("CONST", arg={"value": 2, "dtype": "index"}),
             N("ADD", [4, 6]), N("INDEX", [2, 7]), N("CONST", arg={"value": 0.0, "dtype": "float32"}), N("CMPLT", [7, 3]),
             N("LOAD", [8, 9, 10]), N("ADD", [5, 11]), N("INDEX", [1, 4]), N("STORE", [13, 12]), N("END", [14, 4]),
             N("SINK", [15])])
  x = {"param1": np.array([1, 2, 3, 4], np.float32)}
  got = backend.run(g, x)
  np.testing.assert_array_equal(got["param0"], [4, 6, 3, 4])
  np.testing.assert_array_equal(got["param0"], evaluate(g, x)["param0"])


def test_function_bodies_are_inlined(backend):
  N = lambda op, src=(), arg=None: Node(op, src, arg)   # noqa: E731
  g = Graph([N("VCONST", arg={"values": [3], "dtype": "index"}), N("PARAM", [0], {"slot": 0, "dtype": "int32"}),
             N("MUL", [1, 1]), N("TUPLE", [2]), N("BUFFER", [0], {"slot": 0, "dtype": "int32", "device": "CPU"}),
             N("FUNCTION", [3, 4]), N("GETTUPLE", [5], 0), N("FUNCTION", [3, 6]), N("GETTUPLE", [7], 0)])
  got = backend.run(g, {"buf0": np.array([1, 2, 3], np.int32)})
  np.testing.assert_array_equal(got["out0"], [1, 16, 81])


# ------------------------------------------------------------------ devices: CPU needs clang, PYTHON never touches it
NO_CLANG = "tinygrad's CPU device compiles with clang (even to open): no clang on PATH (apt-get install clang, or scripts/setup.sh as root)"
CONST_CASES = ["STACK/int16", "BITCAST/float32"]

# Run in a child whose PATH holds no clang (no cc either) and which has no DEV, CC or
# TINYSPEC_TINYGRAD_DEVICE: the backend picks its device itself. The child records every
# program it starts and every tinygrad device it opens, and prints one JSON line.
_CHILD = r"""
import json, subprocess, sys
started = []
_popen = subprocess.Popen.__init__
def _record(self, args, *a, **k):
  started.append(str(args if isinstance(args, str) else args[0])); return _popen(self, args, *a, **k)
subprocess.Popen.__init__ = _record
if sys.argv[1] == "tinygrad-first": import tinygrad   # imported before the backend could set DEV
import numpy as np
from tinyspec.graph import Graph, Node
from tinyspec.refimpl import evaluate
from tinyspec.conformance.corpus.cases import load_cases, to_disk
from tinyspec.conformance.run.execute import judge_positive
from tinyspec.interop.tinygrad_backend import TinygradBackend, Refused
from tinyspec.backends import Unavailable
b = TinygradBackend()
out = {"device": b.device, "cases": {}, "consts": {}}
by_id = {c.id: c for c in load_cases()}
for cid in json.loads(sys.argv[2]):
  case = by_id[cid]
  outs = b.run(Graph.load(case.graph), case.load_inputs())
  outs = {k: to_disk(v, case.outputs[k].dtype) if k in case.outputs else v for k, v in outs.items()}
  out["cases"][cid] = judge_positive(case, outs, False)
graphs = {   # constants only: a CONST root, constants through elementwise ops, a bfloat16 CONST
  "CONST": Graph([Node("CONST", (), {"value": 7, "dtype": "int32"})]),
  "CONST-ADD": Graph([Node("CONST", (), {"value": 1.5, "dtype": "float32"}), Node("CONST", (), {"value": 2.0, "dtype": "float32"}),
                      Node("ADD", [0, 1])]),
  "CONST-bfloat16": Graph([Node("CONST", (), {"value": 1.5, "dtype": "bfloat16"})]),
}
for name, g in graphs.items():
  got, want = b.run(g, {}), evaluate(g, {})
  out["consts"][name] = sorted(got) == sorted(want) and all(np.array_equal(np.asarray(got[k], np.float64), np.asarray(want[k], np.float64)) for k in want)
try:
  TinygradBackend("CPU").run(graphs["CONST"], {})
  out["cpu"] = "ran"
except (Refused, Unavailable) as e: out["cpu"] = str(e)
from tinygrad.device import Device
out["opened"], out["started"] = sorted(Device._opened_devices), started
print(json.dumps(out))
"""


def _run_without_clang(tmp_path, order: str) -> dict:
  empty = tmp_path / "bin"
  empty.mkdir(exist_ok=True)
  env = {k: v for k, v in os.environ.items() if k not in ("DEV", "CC", "TINYSPEC_TINYGRAD_DEVICE", "PATH")}
  env["PATH"] = str(empty)
  p = subprocess.run([sys.executable, "-c", _CHILD, order, json.dumps(CONST_CASES)], env=env, cwd=tmp_path,
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-4000:]
  return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", ["backend-first", "tinygrad-first"])
def test_without_clang_constant_graphs_run_on_the_python_device(tmp_path, order):
  """No clang: the backend falls back to tinygrad's PYTHON device, and graphs of constants
  only (which tinygrad keeps deviceless and realizes on a hard-coded CPU) run there too:
  tinygrad's CPU device is never opened and no program (clang) is started, whether or not
  tinygrad was imported (with no DEV) before the backend."""
  _cases(CONST_CASES)
  r = _run_without_clang(tmp_path, order)
  assert r["device"] == "PYTHON"
  assert r["cases"] == {cid: None for cid in CONST_CASES}
  assert all(r["consts"].values()), r["consts"]
  assert "needs clang" in r["cpu"]              # CPU asked for by name: refused, with the reason
  assert not any(d.split(":")[0] == "CPU" for d in r["opened"]), r["opened"]
  assert "PYTHON" in r["opened"]
  assert r["started"] == [], f"programs started without clang: {r['started']}"


def test_default_device_is_cpu_with_clang_else_python(monkeypatch):
  from tinyspec.interop import tinygrad_device as tb
  monkeypatch.delenv("TINYSPEC_TINYGRAD_DEVICE", raising=False)
  monkeypatch.setattr(tb, "have_clang", lambda: True)
  assert tb.tinygrad_device() == "CPU"
  monkeypatch.setattr(tb, "have_clang", lambda: False)
  assert tb.tinygrad_device() == "PYTHON"
  monkeypatch.setenv("TINYSPEC_TINYGRAD_DEVICE", "CPU")
  assert tb.tinygrad_device() == "CPU"          # asked for by name: kept (and refused at setup without clang)


@pytest.mark.skipif(not shutil.which("clang"), reason=NO_CLANG)
@pytest.mark.parametrize("cid", CONST_CASES)
def test_cpu_device_runs_constant_graphs(cid):
  """With clang, the CPU device (the manifest's) runs graphs of constants only on CPU."""
  from tinyspec.conformance.corpus.cases import to_disk
  from tinyspec.conformance.run.execute import judge_positive
  from tinygrad.device import Device
  case, = _cases([cid])
  outs = TinygradBackend("CPU").run(Graph.load(case.graph), case.load_inputs())
  outs = {k: to_disk(v, case.outputs[k].dtype) if k in case.outputs else v for k, v in outs.items()}
  assert judge_positive(case, outs, False) is None
  assert "CPU" in Device._opened_devices


# ------------------------------------------------------------------ the manifests
def test_every_manifest_entry_matches_a_case():
  """No stale entries in the per-device manifests (that each names a documented tinygrad
  bug with a repro is tests/interop/test_interop_bugs.py's)."""
  from tinyspec.conformance.corpus.manifest import load_manifest
  from tinyspec.conformance.corpus.cases import load_cases
  ids = [c.id for c in load_cases()]
  for dev in ("CPU", "PYTHON", "CL"):
    m = load_manifest(f"tinygrad-{dev}")
    assert m.expected_failures, f"conformance/manifests/tinygrad-{dev}.yaml is empty or missing"
    assert not m.unused(ids), f"stale entries of tinygrad-{dev}.yaml: {m.unused(ids)}"


@pytest.mark.parametrize("dev", ["PYTHON", "CPU"])
def test_the_whole_corpus_meets_each_device_manifest(dev, tmp_path):
  """The whole case corpus on tinygrad's device exits 0 with its manifest: no failure the
  manifest does not name, no listed case passing. A merge that adds cases (the -narrowed
  ones found a new bug: narrow-unsigned-unwrapped) cannot leave a manifest wrong."""
  import subprocess
  import sys
  from tinyspec.interop.tinygrad_backend import have_clang
  if dev == "CPU" and not have_clang(): pytest.skip("tinygrad's CPU device needs clang")
  env = {**os.environ, "TINYSPEC_TINYGRAD_DEVICE": dev}
  p = subprocess.run([sys.executable, "-m", "tinyspec", "conformance", "--backend", "tinygrad", "--json", str(tmp_path / "r.json")],
                     env=env, capture_output=True, text=True, timeout=1800)
  assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
