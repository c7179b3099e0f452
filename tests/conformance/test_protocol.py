"""The backend protocol as data (issue 32): spec/protocol.schema.json is what the runner
checks every answer against, inline JSON arrays (chosen in the hello) carry every dtype's
bits both ways, and the starter backends (`tinyspec new-backend`, C with inline arrays only
and Python) pass the ADD cases as written, and fail them when a bug is planted."""
from __future__ import annotations
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from hostile import cli, ROOT
from tinyspec.conformance.run import inline
from tinyspec.conformance.run.protocol import ARRAYS, problem, run_message, schema

EXAMPLES = ROOT / "conformance" / "examples"
CC = shutil.which(os.environ.get("CC", "cc"))


# ------------------------------------------------------------------ inline arrays
def edge_arrays() -> dict:
  """dtype -> an array (storage form) of its edge bit patterns: NaN payloads, both zeros, extremes."""
  from tinyspec.conformance.corpus.cases import storage_dtype
  from tinyspec.dtypes import DTYPES
  out = {}
  for name, dt in DTYPES.items():
    if dt.cls == "void": continue
    st = storage_dtype(name)
    if dt.is_float:
      bits = np.array([0, 1 << (dt.bits - 1), 1, (1 << dt.bits) - 1, (1 << (dt.bits - 1)) - 1, 0x3C00 if dt.bits == 16 else 7], dtype=f"uint{dt.bits}")
      out[name] = bits if name == "bfloat16" else bits.view(st)   # NaN payloads (all ones, max positive), -0.0, the least subnormal
    elif dt.cls == "bool": out[name] = np.array([True, False, True])
    else:
      info = np.iinfo(st)
      out[name] = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=st)
  return out


@pytest.mark.parametrize("dtype", sorted(edge_arrays()))
def test_inline_arrays_carry_every_bit(dtype):
  a = edge_arrays()[dtype].reshape(2, -1) if edge_arrays()[dtype].size % 2 == 0 else edge_arrays()[dtype]
  msg = json.loads(json.dumps(inline.encode(a, dtype)))   # through JSON text
  assert all(type(x) is int for x in msg["data"]) and msg["shape"] == list(a.shape)
  b = inline.decode(msg)
  assert b.dtype == a.dtype and b.shape == a.shape and b.tobytes() == a.tobytes()   # bit for bit: NaN payloads, -0.0


def test_a_scalar_stays_a_scalar():
  assert inline.encode(np.float32(1.0), "float32") == {"dtype": "float32", "shape": [], "data": [1065353216]}
  assert inline.decode({"dtype": "float32", "shape": [], "data": [2147483648]}).tobytes() == np.float32(-0.0).tobytes()


@pytest.mark.parametrize("bad, said", [
  ({"dtype": "float32", "shape": [2], "data": [1]}, "must list the shape's 2 elements"),
  ({"dtype": "uint8", "shape": [1], "data": [256]}, "outside 0..255"),
  ({"dtype": "int8", "shape": [1], "data": [-129]}, "outside -128..127"),
  ({"dtype": "float32", "shape": [1], "data": [1.0]}, "must be a JSON integer"),
  ({"dtype": "bool", "shape": [1], "data": [True]}, "must be a JSON integer"),
  ({"dtype": "float32", "shape": [1], "data": [-1]}, "bit patterns"),
  ({"dtype": "flaot32", "shape": [1], "data": [1]}, "not a dtype"),
  ({"dtype": "void", "shape": [], "data": [0]}, "not a dtype"),
  ({"dtype": "int8", "shape": [1] * 65, "data": [1]}, "at most 64"),
  ({"dtype": "int8", "shape": [1 << 21, 1 << 21], "data": []}, "more than limits.max_numel"),
  ({"dtype": "int8", "shape": [-1], "data": []}, "integers >= 0"),
  ({"dtype": "int8", "shape": [1], "data": [1], "order": "F"}, "exactly dtype, shape and data"),
  ([1, 2], "exactly dtype, shape and data"),
])
def test_a_malformed_inline_array_is_refused_saying_what(bad, said):
  with pytest.raises(inline.BadArray, match=None) as e: inline.decode(bad)
  assert said in str(e.value), str(e.value)


# ------------------------------------------------------------------ the schema is what the runner checks
def test_the_runners_own_messages_have_the_schemas_form(tmp_path):
  """The hello and run requests the runner writes, in both encodings, match the schema it documents."""
  np.save(tmp_path / "x.npy", np.array([1.0, -0.0], np.float32))
  for arrays in ARRAYS:
    msg = run_message("ADD/float32", tmp_path / "g.json", {"buf0": (tmp_path / "x.npy", "float32")}, tmp_path, arrays)
    assert problem(msg, "run") is None, (arrays, problem(msg, "run"))
  assert msg["inputs"]["buf0"] == {"dtype": "float32", "shape": [2], "data": [1065353216, 2147483648]}
  assert problem({"cmd": "hello", "protocol": 1, "arrays": list(ARRAYS)}, "hello") is None
  assert problem({"cmd": "quit"}, "quit") is None


@pytest.mark.parametrize("answer, said", [
  ({"ok": True, "capabilities": {"validate": False}}, "unknown key 'validate'; did you mean 'validates'?"),
  ({"ok": True, "arrays": "json"}, "'arrays': 'json' is not one of"),
  ({"ok": True, "capabilities": {"ops": {"ADD": "tensor"}}}, "'capabilities.ops.ADD': 'tensor' is not of type 'array'"),
  ({"ok": True, "protocol": 2}, "'protocol': 1 was expected"),
  ({"ok": "yes"}, "'ok': 'yes' is not of type 'boolean'"),
])
def test_a_hello_answer_not_of_the_schemas_form_is_named(answer, said):
  assert said in (problem(answer, "hello_answer") or ""), problem(answer, "hello_answer")


def test_every_documented_key_is_accepted_and_a_run_answers_keys_are_checked():
  caps = {k: v.get("default") for k, v in schema()["$defs"]["capabilities"]["properties"].items()}
  assert {"validates", "decomposed", "profile", "label", "ops", "dtypes", "devices"} <= set(caps)
  assert problem({"ok": True, "protocol": 1, "name": "x", "manifest": "m.yaml", "arrays": "inline", "capabilities": caps}, "hello_answer") is None
  assert "unknown key 'output'; did you mean 'outputs'?" in problem({"ok": True, "output": {}}, "run_answer")
  assert problem({"id": "a", "ok": True, "outputs": {"out0": {"dtype": "int8", "shape": [1], "data": [1.5]}}}, "run_answer")
  assert problem({"id": "a", "ok": False, "error": "no", "rule": None}, "run_answer") is None


def test_the_data_check_is_fast_on_a_line_at_the_limit():
  """A run answer of a few million elements is checked at list speed (the schema's items
  check is one loop, not a validation per element)."""
  import time
  data = list(range(2_000_000))
  t0 = time.perf_counter()
  assert problem({"ok": True, "outputs": {"out0": {"dtype": "int64", "shape": [len(data)], "data": data}}}, "run_answer") is None
  assert time.perf_counter() - t0 < 5


# ------------------------------------------------------------------ the starters
def python_starter(tmp_path: Path, plant: tuple[str, str] | None = None) -> str:
  src = (EXAMPLES / "python" / "backend.py").read_text()
  if plant:
    assert plant[0] in src
    src = src.replace(*plant)
  (tmp_path / "backend.py").write_text(src)
  shutil.copy(EXAMPLES / "python" / "manifest.yaml", tmp_path)
  return f"cmd:{sys.executable} {tmp_path / 'backend.py'}"


def c_starter(tmp_path: Path, plant: tuple[str, str] | None = None) -> str:
  if CC is None: pytest.skip("no C compiler")
  src = (EXAMPLES / "c" / "backend.c").read_text()
  if plant:
    assert plant[0] in src
    src = src.replace(*plant)
  (tmp_path / "backend.c").write_text(src)
  shutil.copy(EXAMPLES / "c" / "manifest.yaml", tmp_path)
  r = subprocess.run([CC, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-o", tmp_path / "backend", tmp_path / "backend.c", "-lm"],
                     capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  return f"cmd:{tmp_path / 'backend'}"


def test_the_c_starter_builds_with_cc_and_passes_the_add_cases_inline(tmp_path):
  src = (EXAMPLES / "c" / "backend.c").read_text()
  assert "npy" not in src.lower() and '\\"arrays\\": \\"inline\\"' in src   # inline arrays only
  backend = c_starter(tmp_path)
  rc, text = cli("conformance", "--backend", backend, "-k", "ADD")
  last = text.strip().splitlines()[-1]
  assert rc == 0 and last.startswith("24 passed, 0 failed") and "unsupported" in last, text   # every ADD/* case
  ids = [line.split()[0] for line in cli("conformance", "--backend", backend, "-k", "ADD", "--list")[1].splitlines() if line]
  assert len([i for i in ids if i.startswith("ADD/")]) == 28   # and the four float8 ones, which the starter does not declare


def test_the_python_starter_passes_the_add_cases(tmp_path):
  src = (EXAMPLES / "python" / "backend.py").read_text()
  assert "np.load" not in src and "np.save" not in src and '"arrays": "inline"' in src   # inline arrays only, both ways
  rc, text = cli("conformance", "--backend", python_starter(tmp_path), "-k", "ADD")
  assert rc == 0 and text.strip().splitlines()[-1].startswith("24 passed, 0 failed"), text


def test_the_python_worker_serves_a_backend_with_inline_arrays_both_ways():
  """`python -m tinyspec.conformance.run.worker --arrays inline` chooses inline arrays in its
  hello, and a registered backend's cases (every dtype, bfloat16 and -0.0 included) pass
  through them, in and out; offered .npy alone, it refuses."""
  argv = [sys.executable, "-m", "tinyspec.conformance.run.worker", "--backend", "ref", "--arrays", "inline"]
  def hello(offered):
    p = subprocess.run(argv, input=json.dumps({"cmd": "hello", "protocol": 1, "arrays": offered}) + "\n", capture_output=True, text=True, timeout=60)
    ans = json.loads(p.stdout)
    assert problem(ans, "hello_answer") is None, ans
    return ans
  assert hello(list(ARRAYS))["arrays"] == "inline"
  refused = hello(["npy"])
  assert refused["ok"] is False and "inline" in refused["error"]
  rc, text = cli("conformance", "--backend", "cmd:" + shlex.join(argv), "-k", "ADD", "--manifest", "none")
  assert rc == 0 and "0 failed" in text and "51 passed" in text, text   # the float8 cases too: inline, as their bit patterns


@pytest.mark.parametrize("lang, plant, case, said", [
  # a float16 rounding bug: truncation instead of round to nearest even
  ("c", ("uint64_t m = (uint64_t)rint(ldexp(", "uint64_t m = (uint64_t)trunc(ldexp("), "ADD/float16", "elements differ"),
  # the sign of zero lost on the way out: -0.0 must travel inline as its own bits
  ("python", ('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] + s[1] + 0,'), "ADD/float32", "elements differ"),
  # int8 wraps modulo 256: a saturating add is caught
  ("c", ("  return (a + b) & mask(dt);", "  { int64_t s = as_int(dt, a) + as_int(dt, b), hi = (int64_t)(mask(dt) >> 1);"
                                         " return (uint64_t)(s > hi ? hi : s < -hi - 1 ? -hi - 1 : s) & mask(dt); }"), "ADD/int8", "elements differ"),
])
def test_a_planted_bug_in_a_starter_is_caught_through_inline_arrays(tmp_path, lang, plant, case, said):
  backend = (c_starter if lang == "c" else python_starter)(tmp_path, plant)
  rc, text = cli("conformance", "--backend", backend, "--case", case)
  assert rc == 1 and said in text and "1 failed" in text, text


def test_a_starter_that_reads_inline_only_refuses_a_runner_offering_npy_only():
  p = subprocess.run([sys.executable, str(EXAMPLES / "python" / "backend.py")], input='{"cmd": "hello", "protocol": 1, "arrays": ["npy"]}\n',
                     capture_output=True, text=True, timeout=60)
  ans = json.loads(p.stdout)
  assert ans["ok"] is False and "inline" in ans["error"] and problem(ans, "hello_answer") is None


def test_inputs_too_large_for_one_line_are_that_cases_error(tmp_path, monkeypatch):
  """An inline request over limits.max_line_bytes is never written: the case is an error (file.limit)."""
  from tinyspec.limits import limits
  monkeypatch.setattr(limits(), "max_line_bytes", 4096)
  rc, text = cli("conformance", "--backend", python_starter(tmp_path), "--case", "ADD/float32")
  assert rc == 1 and "[file.limit]" in text and "1 error" in text, text


def test_new_backend_writes_a_project_that_runs_from_its_own_folder(tmp_path, monkeypatch):
  rc, text = cli("new-backend", "--lang", "python", tmp_path / "mine")
  assert rc == 0 and "tinyspec conformance -k ADD" in text, text
  assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["README.md", "backend.py", "manifest.yaml", "pyproject.toml", "test_conformance.py"]
  (tmp_path / "mine" / "deeper").mkdir()
  monkeypatch.chdir(tmp_path / "mine" / "deeper")   # [tool.tinyspec] backend is relative to the pyproject.toml, not to here
  rc, text = cli("conformance", "-k", "ADD/float32")
  assert rc == 0 and "1 passed" in text and "starter-python" in text, text
  rc, text = cli("new-backend", "--lang", "c", tmp_path / "mine")
  assert rc == 2 and "not empty" in text and "[path.write]" in text, text   # nothing overwritten
