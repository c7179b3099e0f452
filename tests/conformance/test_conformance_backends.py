"""The backend registry (tinyspec/backends.py, entry point group tinyspec.backends) and a
representative slice of the case corpus through the built-in backends: one float, one
integer and the bool/void dtypes of every op, the kernel-level templates and every
negative case. The whole corpus is the README's command (`tinyspec conformance --backend
c` / `opencl`); here it would take too long."""
from __future__ import annotations
import pytest
from tinyspec.backends import get_backend, backend_names, register_backend, Backend, Capabilities, capabilities_of, _entry_points
from tinyspec.conformance.corpus.cases import load_cases
from tinyspec.conformance.run.execute import CaseRunner
from tinyspec.conformance.corpus.manifest import load_manifest
from tinyspec.conformance.run.runner import UNEXPECTED

from targets import TARGETS

def test_builtin_backends_come_from_entry_points():
  assert {"ref", "c", "opencl"} <= set(_entry_points()) and {"ref", "c", "opencl"} <= set(backend_names())
  ref = get_backend("ref")
  caps = ref.capabilities()
  assert "ADD" in caps.ops and "tensor" in caps.ops["ADD"] and "bfloat16" in caps.dtypes and caps.validates
  c = get_backend("c").capabilities()
  assert c.decomposed and "WMMA" not in c.ops               # what the compiler lowers, from compiler.supported_ops
  assert get_backend("c") is get_backend("c")               # one instance per name


def test_registering_a_backend():
  class Twice(Backend):
    name = "twice"
    def run(self, graph, inputs): return {"out0": 2 * inputs["buf0"]}
  register_backend("twice-test", Twice)
  b = get_backend("twice-test")
  assert b.name == "twice" and b.capabilities().ops          # the base class declares every trusted op
  class Plain:   # only run(): the object itself, with the default capabilities
    def run(self, graph, inputs): return {}
  p = Plain()
  register_backend("plain-test", p)
  assert get_backend("plain-test") is p and capabilities_of(p).ops == Backend().capabilities().ops
  register_backend("c", Plain(), replace=False)              # an entry point's name is kept
  assert type(get_backend("c")).__name__ == "CBackend"
  with pytest.raises(KeyError, match="unknown backend"): get_backend("no-such-backend")
  with pytest.raises(TypeError): register_backend("bad", 42)


def test_capabilities_round_trip_and_missing():
  caps = Capabilities({"ADD": frozenset({"tensor"})}, frozenset({"float32"}), ("CPU",), decomposed=True, validates=False)
  assert Capabilities.from_json(caps.to_json()) == caps
  assert caps.missing({"ADD": {"tensor", "kernel"}, "MUL": {"tensor"}}, ["float32", "int8"], ["CPU", "GPU:0"]) == \
    ["op ADD at kernel level", "op MUL at tensor level", "dtype int8", "device GPU:0"]


SLICES = {   # OpenCL builds cost about a second each on PoCL: its slice is smaller
  "c": ("/float32", "/int32", "/bool", "/void", "/uint64", "/index", "-kernel", "negative/"),
  "opencl": ("/float16", "/int8", "-kernel", "negative/"),
}


@pytest.mark.parametrize("backend", TARGETS)
def test_a_slice_of_the_corpus_passes(backend):
  cases = [c for c in load_cases() if any(k in c.id for k in SLICES[backend])]
  r = CaseRunner(backend, timeout=120)
  r.capabilities()
  r.manifest = load_manifest(backend)
  res = r.run(cases)
  bad = [f"{x.status} {x.case}: {x.message[:200]}" for x in res if x.status in UNEXPECTED]
  assert not bad, "\n".join(bad)
  assert sum(x.status == "pass" for x in res) > 0.9 * len(cases)


def test_backends_runs_without_the_test_extra():
  """`tinyspec backends` on an install without hypothesis (the test extra): the sanitizer
  fuzzer's line says what it needs instead of the command failing on its import."""
  import subprocess
  import sys
  code = ("import sys; sys.modules['hypothesis'] = None\n"
          "from tinyspec.cli import main; sys.argv = ['tinyspec', 'backends']; main()")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
  assert "sanitizer runtimes (fuzz --sanitize): the fuzzer needs the test extra (hypothesis)" in r.stdout
