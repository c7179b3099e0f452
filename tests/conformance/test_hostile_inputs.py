"""Hostile graph files and input arrays get a clear error with a rule id and exit 1 or 2,
never a traceback (issue 13, "Tracebacks from" and "Unbounded memory"). Each entry is
one input the issue found breaking, as assert_malformed (unreadable: exit 2) or
assert_invalid / assert_refused (refused: exit 1)."""
from __future__ import annotations
import io
import json
import zipfile
import numpy as np
import pytest
from numpy.lib import format as npy_format
from hostile import (cli, console, assert_refused, assert_malformed, assert_invalid, buffer_nodes, neg_graph, kernel_nodes, write_json,
                     peak_rss_mib)
from targets import needs_cl

BIG = 10 ** 5000
HEX = "0x" + "f" * 5000   # YAML: no digit-count limit applies to hex (nor to sexagesimal) integers


# ------------------------------------------------------------------ graph files
def test_empty_roots(tmp_path):
  doc = {"roots": [], "nodes": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}]}
  for cmd in ("validate", "props", "eval", "compile"):
    assert_invalid(tmp_path, doc, "file.schema", "'roots' is empty", cmd=cmd)


YAML_FIELDS = {   # the field, the node list with the integer in it
  "value": "- {op: CONST, arg: {value: N, dtype: int64}}",
  "src": "- {op: CONST, arg: {value: 1, dtype: int32}}\n- {op: NEG, src: [N]}",
  "shape": "- {op: CONST, arg: {value: 1, dtype: int32}, shape: [N]}",
  "version": "{version: N, nodes: [{op: CONST, arg: {value: 1, dtype: int32}}]}",
  "roots": "{roots: [N], nodes: [{op: CONST, arg: {value: 1, dtype: int32}}]}",
  "values": "- {op: VCONST, arg: {values: [N], dtype: index}}",
  "reshape": "- {op: CONST, arg: {value: 1, dtype: int32}}\n- {op: RESHAPE, src: [0, 0], arg: [N]}",
  "tag": "- {op: CONST, arg: {value: 1, dtype: int32}, tag: N}",
}


@pytest.mark.parametrize("field", sorted(YAML_FIELDS))
@pytest.mark.parametrize("number", [HEX, "9" * 5000, "1:2:3:4:5:6:7:8:9:" * 120 + "1"], ids=["hex", "decimal", "sexagesimal"])
def test_a_yaml_integer_of_thousands_of_digits(tmp_path, field, number):
  text = YAML_FIELDS[field].replace("N", number)
  for cmd in ("validate", "eval", "compile"):
    assert_malformed(tmp_path, text.encode(), "file.limit", "limits.max_int_digits", name="g.yaml", cmd=cmd)


def test_a_json_integer_over_the_digit_limit(tmp_path):
  assert_malformed(tmp_path, b'[{"op": "CONST", "arg": {"value": 1' + b"0" * 400 + b', "dtype": "float64"}}]', "file.limit", "401 digits")
  ok = tmp_path / "ok.json"
  ok.write_bytes(b'[{"op": "CONST", "arg": {"value": 1' + b"0" * 300 + b', "dtype": "float64"}, "tag": 1' + b"0" * 399 + b'}]')
  assert cli("validate", ok)[0] == 0   # 400 digits is the limit; a float64 may be written out as an integer


def test_an_integer_past_float64_in_a_float_constant(tmp_path):
  assert_invalid(tmp_path, [{"op": "CONST", "arg": {"value": 10 ** 399, "dtype": "float64"}}], "CONST.value", "node 0 (CONST)")


def test_an_empty_shape_no_numpy_array_can_hold(tmp_path):
  g = buffer_nodes((0, 1 << 40, 1 << 40)) + [{"op": "NEG", "src": [1]}]
  assert cli("validate", write_json(tmp_path / "v.json", g))[0] == 0   # a valid graph (no elements)
  assert_invalid(tmp_path, g, "eval.unsupported", "NumPy cannot hold", cmd="eval")
  assert_invalid(tmp_path, g, "eval.unsupported", "NumPy cannot hold", cmd="run")


@pytest.mark.parametrize("cmd", ["validate", "eval", "run", "compile"])
def test_a_rank_65_shape(tmp_path, cmd):
  assert_invalid(tmp_path, neg_graph((1,) * 65), "shape.limit", "65 dims", "limits.max_rank", cmd=cmd)


def test_rank_grown_by_a_stack_chain(tmp_path):
  nodes = [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}]
  for i in range(66): nodes.append({"op": "STACK", "src": [i, i]})
  assert_invalid(tmp_path, nodes, "shape.limit", "limits.max_rank")


def test_reshapes_of_rank_100000_are_refused_at_once(tmp_path):
  """669 KB of rank-1e5 reshapes took 45 s to validate: refused by rank now."""
  nodes = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}, {"op": "VCONST", "arg": {"values": [1] * 100000, "dtype": "index"}}]
  for k in range(20): nodes.append({"op": "RESHAPE", "src": [0 if k == 0 else len(nodes) - 1, 1]})
  r = console("validate", "--timeout", "30", write_json(tmp_path / "g.json", nodes), timeout=60)
  assert r.returncode == 1 and "[shape.limit]" in r.stdout, r.stdout[-2000:]


def test_a_kernel_body_declared_a_program(tmp_path):
  doc = {"level": "program", "nodes": kernel_nodes()}
  assert_invalid(tmp_path, doc, "eval.unsupported", "LINEAR", cmd="eval")
  assert_invalid(tmp_path, doc, "compile.form", cmd="compile")


@pytest.mark.parametrize("cmd", ["validate", "eval", "compile", "run"])
def test_slot_written_as_a_float(tmp_path, cmd):
  g = neg_graph(); g[1]["arg"]["slot"] = 0.0
  assert_invalid(tmp_path, g, "arg.schema", "0.0 is not of type 'integer'", cmd=cmd)
  k = kernel_nodes(); k[3]["arg"]["slot"] = 0.0
  assert_invalid(tmp_path, k, "arg.schema", cmd=cmd)


@pytest.mark.parametrize("cmd", ["validate", "eval", "compile", "run"])
def test_a_special_name_with_a_newline(tmp_path, cmd):
  """`$` matches before a final newline in Python; JSON Schema patterns are ECMA-262."""
  assert_invalid(tmp_path, kernel_nodes("gidx0\n"), "arg.schema", "does not match", cmd=cmd)


def test_an_op_name_with_a_newline(tmp_path):
  assert_invalid(tmp_path, [{"op": "CONST\n", "arg": {"value": 1, "dtype": "int32"}}], "file.schema", "upper-case op name")


@pytest.mark.parametrize("backend", ["c", pytest.param("opencl", marks=needs_cl)])
def test_a_view_of_a_view(tmp_path, backend):
  g = buffer_nodes((16,)) + [{"op": "BUFFER_VIEW", "src": [1], "arg": {"size": 8, "dtype": "float32", "offset": 16}},
                             {"op": "BUFFER_VIEW", "src": [2], "arg": {"size": 4, "dtype": "float32", "offset": 8}}, {"op": "NEG", "src": [3]}]
  f = write_json(tmp_path / "g.json", g)
  x = np.arange(16, dtype=np.float32)
  np.save(tmp_path / "x.npy", x)
  rc, text = cli("run", f, "--backend", backend, "--input", f"buf0={tmp_path / 'x.npy'}", "--out", tmp_path / "o")
  assert rc == 0, text
  assert np.load(tmp_path / "o" / "out0.npy").tolist() == (-x[6:10]).tolist()   # bytes 16 + 8 = element 6


@pytest.mark.parametrize("backend", ["c", pytest.param("opencl", marks=needs_cl)])
def test_a_4_tib_buffer(tmp_path, backend):
  f = write_json(tmp_path / "g.json", neg_graph((1 << 40,)))
  assert_refused(["run", f, "--backend", backend], "run.budget", 1, "over the memory budget")
  assert_refused(["eval", f], "eval.budget", 1)


@needs_cl
def test_a_work_group_the_device_cannot_launch(tmp_path):
  f = write_json(tmp_path / "g.json", kernel_nodes("lidx0", bound=100000))
  assert_refused(["run", f, "--backend", "opencl"], "run.device", 1, "work-group")


def test_opencl_largest_allocation_is_checked_before_allocating(monkeypatch):
  """The device's max_mem_alloc_size is checked with the budget, before any buffer exists."""
  from tinyspec.compiler import compile_graph, CompileError
  from tinyspec.graph import Graph
  from tinyspec.compiler.executor import Executable, HostMemory
  ex = Executable.__new__(Executable)
  ex.c = compile_graph(Graph.loads(json.dumps(neg_graph((1 << 20,)))), "c", keep_stages=False)
  ex.mem = HostMemory(); ex.mem.max_alloc = 1 << 10
  with pytest.raises(CompileError) as e: ex._check_memory(ex.c.schedule.meta.get("memory", {"buffers": {}, "arena": 0}), ex.storages())
  assert e.value.rule == "run.device"


# ------------------------------------------------------------------ input arrays
def npy_bytes(shape, descr="<f4", fortran=False, data=b"") -> bytes:
  buf = io.BytesIO()
  npy_format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": fortran, "shape": shape})
  return buf.getvalue() + data


@pytest.mark.parametrize("cmd", [["eval"], ["run"], ["run", "--backend", "c"]], ids=["eval", "run", "run-c"])
def test_a_npy_header_claiming_2_40_elements(tmp_path, cmd):
  x = tmp_path / "x.npy"; x.write_bytes(npy_bytes((1 << 40,), data=bytes(64)))
  g = write_json(tmp_path / "g.json", neg_graph())
  _text = assert_refused([cmd[0], g, *cmd[1:], "--input", f"buf0={x}"], "eval.budget", 1, "bytes")
  x.write_bytes(npy_bytes((2,), data=bytes(3)))
  assert_refused([cmd[0], g, *cmd[1:], "--input", f"buf0={x}"], "file.parse", 2, "truncated")


@pytest.mark.parametrize("cmd", [["eval"], ["run"], ["run", "--backend", "c"]], ids=["eval", "run", "run-c"])
@pytest.mark.parametrize("descr", [[("a", "<f4"), ("b", "<i4")], "|O", "<c8", "<U3", ("<f4", (2,))], ids=["structured", "object", "complex", "str", "subarray"])
def test_an_npy_of_a_dtype_no_tinyspec_dtype_is_stored_as(tmp_path, cmd, descr):
  x = tmp_path / "x.npy"; x.write_bytes(npy_bytes((2,), descr=descr, data=bytes(64)))
  g = write_json(tmp_path / "g.json", neg_graph())
  assert_refused([cmd[0], g, *cmd[1:], "--input", f"buf0={x}"], "file.schema", 2, "not a plain bool, integer or float dtype")


def test_a_structured_array_given_to_the_c_backend_in_python(tmp_path):
  from tinyspec.compiler import compile_graph
  from tinyspec.graph import Graph
  c = compile_graph(Graph.loads(json.dumps(neg_graph())), "c", keep_stages=False)
  with pytest.raises(ValueError, match="not a plain"): c.run({"buf0": np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])})


@pytest.mark.parametrize("shape", [(0, 1 << 40, 1 << 40), (1,) * 65, (1 << 41,)], ids=["empty-unholdable", "rank-65", "2^41"])
def test_npy_shapes_over_the_limits(tmp_path, shape):
  x = tmp_path / "x.npy"; x.write_bytes(npy_bytes(shape, data=bytes(8)))
  assert_refused(["eval", write_json(tmp_path / "g.json", neg_graph()), "--input", f"buf0={x}"], "file.limit", 2)


def test_npz_bomb_is_refused_before_it_expands(tmp_path):
  """A 100 KB archive of a 256 MiB array: the member's declared size is checked against the
  budget before a byte is decompressed (it reached 2.1 GB before the shape check)."""
  bomb = tmp_path / "bomb.npz"
  with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("buf0.npy", "w", force_zip64=True) as m:
      m.write(npy_bytes((1 << 26,)))
      chunk = bytes(1 << 22)
      for _ in range(64): m.write(chunk)
  assert bomb.stat().st_size < 2 << 20
  g = write_json(tmp_path / "g.json", neg_graph((1 << 26,)))
  r, peak = peak_rss_mib(["eval", g, "--input", bomb], env={"TINYSPEC_EVAL_BUDGET": "64M"})
  assert r.returncode == 1 and "[eval.budget]" in r.stderr, r.stderr
  assert peak < 200, peak


def test_inputs_count_against_the_budget():
  from tinyspec.refimpl import evaluate, EvalError
  from tinyspec.graph import Graph
  g = Graph.loads(json.dumps(neg_graph((1 << 20,))))
  x = np.zeros(1 << 20, np.float32)   # 4 MiB
  with pytest.raises(EvalError) as e: evaluate(g, {"buf0": x}, budget=3 << 20)   # the input alone does not fit
  assert e.value.rule == "eval.budget" and "input 'buf0' needs 4,194,304 bytes" in str(e.value)
  assert evaluate(g, {"buf0": x}, budget=64 << 20)["out0"].shape == (1 << 20,)


# ------------------------------------------------------------------ limits on the file itself
def test_2e6_non_objects_stay_small(tmp_path):
  """A 4 MB file of 2e6 numbers reached 825 MB and printed 2e6 lines: the errors are
  capped (limits.max_diagnostics, with a count of the rest) and the broken nodes shared."""
  f = tmp_path / "g.json"
  f.write_bytes(b"[" + b"1," * 1999999 + b"1]")
  r, peak = peak_rss_mib(["validate", f])
  lines = r.stdout.splitlines()
  assert r.returncode == 1 and len(lines) == 201, len(lines)
  assert "1,999,800 more errors not reported (limits.max_diagnostics = 200)" in lines[-1]
  assert peak < 400, peak
  rc, text = cli("validate", "--json", f)
  errs = json.loads(text)["files"][0]["errors"]
  assert len(errs) == 201 and errs[-1]["rule"] == "file.limit"


def test_max_nodes_is_enforced(tmp_path, monkeypatch):
  from tinyspec import limits
  L = limits.limits()
  monkeypatch.setattr(L, "max_nodes", 1000)
  nodes = [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}] * 1001
  assert_malformed(tmp_path, json.dumps(nodes).encode(), "file.limit", "1,001 nodes, more than limits.max_nodes = 1,000")
  assert cli("validate", write_json(tmp_path / "ok.json", nodes[:1000]))[0] == 0


def test_a_10_million_node_file_under_a_memory_cap(tmp_path):
  """10,000,001 nodes under `ulimit -v`: refused before parsing (the load would not fit the
  budget, which follows RLIMIT_AS), not a MemoryError."""
  f = tmp_path / "big.json"
  with open(f, "wb") as out:
    out.write(b"[")
    out.write(b'{"op":"NOOP"},' * 10_000_000)
    out.write(b'{"op":"NOOP"}]')
  r, peak = peak_rss_mib(["validate", f], limit_as=3 << 30, env={"TINYSPEC_EVAL_BUDGET": ""})
  assert r.returncode == 2 and "[file.limit]" in r.stdout and "over the memory budget" in r.stdout, r.stdout + r.stderr


def test_file_bytes_nesting_and_string_limits(tmp_path, monkeypatch):
  from tinyspec import limits
  L = limits.limits()
  assert_malformed(tmp_path, b'[{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}, "tag": ' + b"[" * 65 + b"]" * 65 + b"}]",
                   "file.limit", "limits.max_nesting = 64")
  monkeypatch.setattr(L, "max_string", 100)
  assert_malformed(tmp_path, json.dumps([{"op": "BINARY", "arg": {"data": "A" * 104}}]).encode(), "file.limit", "limits.max_string = 100")
  monkeypatch.setattr(L, "max_file_bytes", 1000)
  assert_malformed(tmp_path, b" " * 1001 + b"[]", "file.limit", "more than the 1,000 allowed")


@pytest.mark.parametrize("what", ["fifo", "dir", "devzero"])
def test_a_graph_that_is_not_a_regular_file(tmp_path, what):
  import os
  f = tmp_path / "g.json"
  if what == "fifo": os.mkfifo(f)
  elif what == "dir": f.mkdir()
  else: f.symlink_to("/dev/zero")
  r = console("validate", f, timeout=60)
  assert r.returncode == 2 and "[file.read]" in r.stdout and "not a regular file" in r.stdout, r.stdout


def test_the_budget_follows_rlimit_as_and_the_cgroup(tmp_path):
  import subprocess
  import sys
  code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
          "from tinyspec.limits import default_budget, memory_available; print(default_budget(), memory_available())")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=120)
  budget, avail = map(int, r.stdout.split())
  assert avail < 2 << 30 and budget == avail // 4, r.stdout + r.stderr
  from tinyspec.limits import cgroup_memory_left
  v2 = tmp_path / "v2"; (v2 / "grp").mkdir(parents=True)
  (v2 / "grp" / "memory.max").write_text("1073741824\n"); (v2 / "grp" / "memory.current").write_text("73741824\n")
  (tmp_path / "cg2").write_text("0::/grp\n")
  assert cgroup_memory_left(v2, tmp_path / "cg2") == 1000000000
  (v2 / "grp" / "memory.max").write_text("max\n")
  assert cgroup_memory_left(v2, tmp_path / "cg2") >= 1 << 62
  v1 = tmp_path / "v1"; (v1 / "memory" / "g").mkdir(parents=True)
  (v1 / "memory" / "g" / "memory.limit_in_bytes").write_text("536870912\n"); (v1 / "memory" / "g" / "memory.usage_in_bytes").write_text("0\n")
  (tmp_path / "cg1").write_text("4:memory:/g\n3:cpu:/x\n")
  assert cgroup_memory_left(v1, tmp_path / "cg1") == 536870912


# ------------------------------------------------------------------ the catalogues
LIMIT_TESTS = {   # every `limits:` entry -> the test that breaks it
  "max_numel": "test_npy_shapes_over_the_limits", "max_rank": "test_a_rank_65_shape", "max_nodes": "test_max_nodes_is_enforced",
  "max_file_bytes": "test_file_bytes_nesting_and_string_limits", "load_factor": "test_a_10_million_node_file_under_a_memory_cap",
  "max_nesting": "test_file_bytes_nesting_and_string_limits", "max_string": "test_file_bytes_nesting_and_string_limits",
  "max_int_digits": "test_a_json_integer_over_the_digit_limit", "max_diagnostics": "test_2e6_non_objects_stay_small",
  "max_small_file": "test_small_files_have_a_limit", "max_line_bytes": "test_a_line_without_a_newline_is_not_buffered_whole",
  "timeout": "test_validate_and_compile_have_a_time_limit",
}


def test_every_limit_is_enforced_and_broken_by_a_test():
  import re
  from pathlib import Path
  import test_hostile_runner
  from tinyspec.tables import tables
  root = Path(__file__).resolve().parents[2]
  code = "".join(p.read_text() for d in ("tinyspec", "refimpl", "compiler", "conformance", "show", "docgen") for p in (root / d).rglob("*.py")
                 if p.name != "tables.py")
  assert set(LIMIT_TESTS) == set(tables().limits)
  for name, test in LIMIT_TESTS.items():
    assert re.search(rf"\.{name}\b|MAX_{name[4:].upper()}\b", code), f"limits.{name} is read nowhere"
    assert test in globals() or hasattr(test_hostile_runner, test), test


def test_every_refusal_rule_id_is_catalogued():
  """Rule ids the code refuses by (outside the validator's own, tests/conformance/test_rules_corpus.py)
  are in a catalogue: ops.yaml `rules:` or `io_rules:`, or render.yaml `rules:`."""
  import re
  from pathlib import Path
  from tinyspec.tables import tables
  from tinyspec.compiler.rendertables import render_tables
  T = tables()
  known = T.rule_ids() | set(T.io_rules) | set(render_tables()["rules"])
  root = Path(__file__).resolve().parents[2]
  found = set()
  for d in ("tinyspec", "refimpl", "compiler", "conformance", "show", "docgen"):
    for p in (root / d).rglob("*.py"):
      text = p.read_text()
      found |= set(re.findall(r'rule="([a-z_]+\.[a-z_]+)"', text)) | set(re.findall(r'CompileError\("([a-z_]+\.[a-z_]+)"', text))
      found |= set(re.findall(r'FileRefused\([^,()]*, "([a-z_]+\.[a-z_]+)"', text)) | set(re.findall(r'\[((?:[a-z]+)\.[a-z_]+)\]"', text))
  assert "run.timeout" in found and "case.pin" in found and "path.name" in found   # the regexes see them
  assert found - known == set(), f"rule ids used but catalogued nowhere: {sorted(found - known)}"


def test_small_files_have_a_limit(tmp_path, monkeypatch):
  """case.json files, manifests and the rule corpus's expectation files are read within limits.max_small_file."""
  from tinyspec import limits
  from tinyspec.conformance.corpus.cases import load_cases, CaseError
  from tinyspec.conformance.corpus.manifest import load_manifest, ManifestError
  monkeypatch.setattr(limits.limits(), "max_small_file", 100)
  (tmp_path / "c").mkdir(); (tmp_path / "c" / "case.json").write_text(" " * 101 + "{}")
  with pytest.raises(CaseError, match="file.limit"): load_cases(tmp_path)
  (tmp_path / "m.yaml").write_text("#" * 101)
  with pytest.raises(ManifestError, match="file.limit"): load_manifest(path=tmp_path / "m.yaml")
