"""Failures that say why (issue 23): a repeated message printed once with a closing list of
the failing ids, a backend's first stderr lines (where Node and a shell say what went wrong),
capabilities checked by name, operands only where an input has one element per output
element, exit 5 when no case ran."""
from __future__ import annotations
import json
import re
import shlex
import sys
import textwrap
from pathlib import Path
import numpy as np
import pytest
from tinyspec.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "support" / "fake_backend.py"


def run(capsys, *argv) -> tuple[int, str, str]:
  rc = main(["conformance", *map(str, argv)])
  out, err = capsys.readouterr()
  return rc, out, err


def script(tmp_path, body: str) -> str:
  p = tmp_path / "backend.py"
  p.write_text(textwrap.dedent(body))
  return f"cmd:{shlex.quote(sys.executable)} {p}"


NODE_LIKE = "Error: Cannot find module 'tinyspec-node-runtime'\n" + "".join(f"    at frame{k} (internal/modules/cjs/loader.js:{k})\n" for k in range(60))


def test_a_backend_that_cannot_start_shows_its_first_stderr_lines(tmp_path, capsys):
  backend = script(tmp_path, f"""
    import sys
    sys.stderr.write({NODE_LIKE!r}); sys.exit(1)
  """)
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32")
  assert rc == 2 and "Error: Cannot find module 'tinyspec-node-runtime'" in err, err   # the head, not only the tail
  assert "frame59" in err and "frame30" not in err                                  # and the tail; the middle left out


def test_the_same_error_on_every_case_is_said_once(tmp_path, capsys):
  backend = script(tmp_path, f"""
    import json, sys
    caps = {{"ops": {{"ADD": ["tensor"], "BUFFER": ["tensor"], "VCONST": ["tensor"]}}, "dtypes": ["float32", "int32", "int8", "index"]}}
    for line in sys.stdin:
      msg = json.loads(line)
      if msg["cmd"] == "hello": print(json.dumps({{"ok": True, "protocol": 1, "name": "lazy", "capabilities": caps}}), flush=True)
      else: sys.stderr.write({NODE_LIKE!r}); sys.exit(1)   # every run: a module it loads lazily is missing
  """)
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32", "--case", "ADD/int32", "--case", "ADD/int8-broadcast")
  assert rc == 1, out + err
  assert out.count("Cannot find module") == 1, out                                  # printed once, not three times
  closing = out[out.index("failing cases (3):"):]
  assert "ERROR lazy ADD/float32 and 2 more with the same message (shown above once): ADD/int32, ADD/int8-broadcast" in closing
  assert "rerun them: tinyspec conformance --backend" in closing
  assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 3 errors"


def test_different_failures_are_each_said(tmp_path, capsys):
  from test_repro import _broken_backend
  rc, out, err = run(capsys, "--backend", _broken_backend(tmp_path), "--case", "ADD/float32", "--case", "ADD/int32")
  assert rc == 1 and out.count("elements differ") == 2, out
  closing = out[out.index("failing cases (2):"):]
  assert "FAIL  starter-python ADD/float32\n  FAIL  starter-python ADD/int32\n" in closing and "same message" not in closing


@pytest.mark.parametrize("caps, said", [
  ({"ops": {"Add": ["tensor"]}, "dtypes": ["float32"]}, "op 'Add' (did you mean 'ADD'?)"),
  ({"ops": {"ADD": ["tensor"]}, "dtypes": ["flaot32"]}, "dtype 'flaot32' (did you mean 'float32'?)"),
  ({"ops": {"ADD": ["tensr"]}, "dtypes": ["float32"]}, "level 'tensr' (did you mean 'tensor'?) of op ADD"),
  ({"ops": {"FROB": ["tensor"]}, "dtypes": ["float32"]}, "op 'FROB'"),
])
def test_capabilities_are_checked_by_name(capsys, caps, said):
  backend = f"cmd:{shlex.quote(sys.executable)} {FAKE} caps {shlex.quote(json.dumps(caps))}"
  rc, out, err = run(capsys, "--backend", backend, "-k", "ADD")
  assert rc == 2 and said in err and "[backend.protocol]" in err, err
  assert main(["run", "--backend", backend, "--case", "ADD/float32"]) == 2 and said in capsys.readouterr().err


def test_the_registered_backends_declare_only_known_names():
  from tinyspec.backends import backend_names, capabilities_of, get_backend
  for name in backend_names():
    try: b = get_backend(name)
    except Exception: continue   # (a backend whose runtime is missing here: its own tests say so)
    try: caps = capabilities_of(b)
    except Exception: continue
    assert caps.unknown_names() == [], name


def test_a_run_where_every_case_is_unsupported_exits_5(capsys):
  caps = json.dumps({"ops": {"NEG": ["tensor"]}, "dtypes": ["float32"]})
  rc, out, err = run(capsys, "--backend", f"cmd:{shlex.quote(sys.executable)} {FAKE} caps {shlex.quote(caps)}", "-k", "ADD/ and not negative")
  assert rc == 5 and "no case ran" in err and "unsupported" in out, out + err
  assert "profile: not judged (no case ran)" in out


# ------------------------------------------------------------------ operands
class _Case:
  def __init__(self, tmp_path, inputs: dict, out_shape):
    from tinyspec.conformance.corpus.cases import Output
    self.inputs = {}
    for k, v in inputs.items():
      np.save(tmp_path / f"{k}.npy", v); self.inputs[k] = (tmp_path / f"{k}.npy", "float32")
    np.save(tmp_path / "out.npy", np.zeros(out_shape, np.float32))
    self.outputs = {"out0": Output("out0", tmp_path / "out.npy", "float32")}


def test_operands_are_named_only_where_they_are_one_element(tmp_path):
  from tinyspec.conformance.run.failures import operand_lines
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  row = np.array([10, 20, 30], np.float32)
  c = _Case(tmp_path, {"buf0": a, "buf1": row}, (2, 3))
  assert operand_lines(c, "out0: 1 of 6 elements differ; at (1, 2): got 1.0, expected 2.0") == \
    ["operands of element (1, 2): buf0[1, 2] = 5.0 (0x40a00000), buf1[2] = 30.0 (0x41f00000)"]   # broadcast from the right
  c = _Case(tmp_path, {"buf0": a}, (2, 1))                                          # a reduction over the last axis
  assert operand_lines(c, "out0: 1 of 2 elements differ; at (1, 0): got 1.0, expected 2.0") == []
  c = _Case(tmp_path, {"buf0": a}, (3, 2))                                          # a permutation
  assert operand_lines(c, "out0: 1 of 6 elements differ; at (2, 1): got 1.0, expected 2.0") == []
  c = _Case(tmp_path, {"buf0": np.array([-0.0, np.nan], np.float32)}, (2,))
  assert operand_lines(c, "out0: 2 of 2 elements differ; at (0,): got 1.0, expected 2.0; at (1,): got 0.0, expected nan") == \
    ["operands of element (0,): buf0[0] = -0.0 (0x80000000)", "operands of element (1,): buf0[1] = nan (0x7fc00000)"]


def test_paths_into_the_corpus_are_relative_to_it(tmp_path, capsys):
  import shutil
  corpus = tmp_path / "corpus"
  shutil.copytree(ROOT / "conformance" / "cases" / "ADD" / "float32", corpus / "ADD" / "float32")
  (corpus / "ADD" / "float32" / "in.buf0.npy").write_bytes(b"garbage")
  rc, out, err = run(capsys, "--backend", "ref", "--cases", corpus, "--case", "ADD/float32", "--no-verify")
  assert rc == 1 and "refused: input: ADD/float32/in.buf0.npy: not a .npy array" in out, out
  assert f"failing cases (1, in the corpus {corpus}):" in out
  repro = next(line for line in out.splitlines() if "repro: " in line)
  assert repro.endswith(f"--case {corpus / 'ADD' / 'float32'} --no-verify"), repro   # the command needs a path that works here
  assert f"rerun them: tinyspec conformance --backend ref --cases {corpus} --no-verify --case ADD/float32" in out


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="needs Node.js (the issue's backend language)")
def test_a_node_backend_that_cannot_start_says_why(tmp_path, capsys):
  """Node puts the error on its fifth line and a stack after it: a tail of stderr alone
  would show the stack and the version, not the error."""
  rc, out, err = run(capsys, "--backend", f"cmd:node {tmp_path / 'no-such-backend.js'}", "--case", "ADD/float32")
  assert rc == 2 and f"Error: Cannot find module '{tmp_path / 'no-such-backend.js'}'" in err, err


# ------------------------------------------------------------------ float values: bits and ulps
TRUNCATING_HALF_ADD = ('"ADD": lambda s, arg: (lambda r: np.where(np.abs(r.astype(np.float16).astype(np.float64)) > np.abs(r), '
                       'np.nextafter(r.astype(np.float16), np.float16(0)), r.astype(np.float16)))(s[0].astype(np.float64) + '
                       's[1].astype(np.float64)) if s[0].dtype == np.float16 else s[0] + s[1],')


def test_a_float_failure_shows_bits_and_ulps(tmp_path, capsys):
  """A planted float16 rounding bug (ADD rounded toward zero instead of to nearest): the
  message, the JSON report and the JUnit report give each differing element's bits in hex
  and its distance in ulps, and the operands' bits, so the rounding is read off at once."""
  import shutil
  import xml.etree.ElementTree as ET
  example = ROOT / "conformance" / "examples" / "python" / "backend.py"   # the Python starter
  src = example.read_text()
  assert '"ADD": lambda s, arg: s[0] + s[1],' in src
  (tmp_path / "half.py").write_text(src.replace('"ADD": lambda s, arg: s[0] + s[1],', TRUNCATING_HALF_ADD))
  shutil.copy(example.parent / "manifest.yaml", tmp_path)
  backend = f"cmd:{shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'half.py'))}"
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float16", "--case", "ADD/float32",
                     "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml")
  assert rc == 1 and "1 passed, 1 failed" in out, out + err
  line = next(x for x in out.splitlines() if "elements differ" in x)
  m = re.search(r"got (\S+) \(0x([0-9a-f]{4})\), expected (\S+) \(0x([0-9a-f]{4})\), 1 ulp apart \(bit-exact\)", line)
  assert m, line
  got, want = int(m.group(2), 16), int(m.group(4), 16)
  assert abs(got - want) == 1 and abs(float(m.group(1))) < abs(float(m.group(3))), line     # one step toward zero
  assert re.search(r"operands of element \(\d+,\): buf0\[\d+\] = \S+ \(0x[0-9a-f]{4}\), buf1\[\d+\] = \S+ \(0x[0-9a-f]{4}\)", out), out
  report = json.loads((tmp_path / "r.json").read_text())
  said = json.dumps(report)
  assert m.group(0) in said.replace('\\"', '"'), said[:2000]
  failure = next(f for f in ET.parse(tmp_path / "r.xml").iter("failure"))
  assert m.group(0) in (failure.get("message", "") + (failure.text or "")), ET.tostring(failure)[:2000]


def test_describe_names_the_ulps_and_bits_of_every_float_dtype():
  from tinyspec.conformance.run.compare import describe
  from tinyspec.refimpl.numeric import NP
  for dt, one, next_ in (("float16", "0x3c00", "0x3c01"), ("bfloat16", "0x3f80", "0x3f81"), ("float32", "0x3f800000", "0x3f800001"),
                         ("float64", "0x3ff0000000000000", "0x3ff0000000000001")):
    a = np.array([1.0], NP[dt])
    b = np.array([np.nextafter(np.float64(1.0), 2.0) if dt == "float64" else 0], NP[dt])
    if dt != "float64": b = (np.array([int(next_, 16)], np.uint16 if dt != "float32" else np.uint32)).view(NP[dt])
    msg = describe(b, a, dt)
    assert f"got {float(b[0])!r} ({next_}), expected 1.0 ({one}), 1 ulp apart (bit-exact)" in msg, (dt, msg)
  msg = describe(np.array([0.0], np.float32), np.array([-0.0], np.float32), "float32")
  assert "got 0.0 (0x00000000), expected -0.0 (0x80000000), 0 ulp apart (bit-exact)" in msg, msg
  msg = describe(np.array([1.0], np.float32), np.array([np.nan], np.float32), "float32")
  assert "got 1.0 (0x3f800000), expected nan (0x7fc00000) (bit-exact)" in msg, msg     # NaN: no distance
  assert "0x" not in describe(np.array([1], np.int32), np.array([2], np.int32), "int32")
