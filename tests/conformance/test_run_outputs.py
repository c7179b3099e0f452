"""What `tinyspec run` writes and refuses: bfloat16 outputs written by --out read back with
plain NumPy as the corpus stores them (uint16 bit patterns, not an opaque `|V2`), on every
kind of backend; --compare ref with --cast is a usage error that says why."""
from __future__ import annotations
import json
import sys
import numpy as np
import pytest
from hostile import cli, ROOT

STARTER = ROOT / "conformance" / "examples" / "python" / "backend.py"
# 1.5 + 0.25, -0.0 + -0.0, 3.0 + 1.0 in bfloat16: 1.75 (0x3fe0), -0.0 (0x8000), 4.0 (0x4080)
GRAPH = [{"op": "VCONST", "arg": {"values": [1.5, -0.0, 3.0], "dtype": "bfloat16"}},
         {"op": "VCONST", "arg": {"values": [0.25, -0.0, 1.0], "dtype": "bfloat16"}}, {"op": "ADD", "src": [0, 1]}]
BITS = [0x3FE0, 0x8000, 0x4080]


@pytest.mark.parametrize("backend", ["ref", "c", "starter"])
def test_bfloat16_outputs_written_by_out_read_back_as_bit_patterns(tmp_path, backend):
  g = tmp_path / "g.json"; g.write_text(json.dumps(GRAPH))
  spec = f"cmd:{sys.executable} {STARTER}" if backend == "starter" else backend
  rc, text = cli("run", g, "--backend", spec, "--out", tmp_path / "o")
  assert rc == 0 and "out0: bfloat16 [3]" in text, text   # every backend's outputs shown alike
  a = np.load(tmp_path / "o" / "out0.npy")
  assert a.dtype == np.uint16 and a.tolist() == BITS, (a.dtype, a)


def test_eval_out_and_npz_write_bfloat16_as_bit_patterns(tmp_path):
  g = tmp_path / "g.json"; g.write_text(json.dumps(GRAPH))
  assert cli("eval", g, "--out", tmp_path / "o")[0] == 0
  assert cli("eval", g, "--out", tmp_path / "o.npz", "--trace")[0] == 0
  assert np.load(tmp_path / "o" / "out0.npy").tolist() == BITS
  with np.load(tmp_path / "o.npz") as z:
    assert all(z[k].dtype == np.uint16 for k in z.files) and z["out0"].tolist() == BITS


def test_compare_with_cast_is_a_usage_error(tmp_path):
  g = tmp_path / "g.json"
  g.write_text(json.dumps([{"op": "VCONST", "arg": {"values": [3], "dtype": "index"}},
                           {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                           {"op": "ADD", "src": [1, 1]}]))
  np.save(tmp_path / "x.npy", np.arange(3, dtype=np.int32))   # int32 into a float32 buffer: what --cast would convert
  rc, text = cli("run", g, "--backend", "c", "--input", f"buf0={tmp_path / 'x.npy'}", "--compare", "ref", "--cast")
  assert rc == 2 and "--cast" in text and "--compare" in text, text
  assert text.count("\n") <= 2, text   # said once, no traceback (cli checks)
  rc, text = cli("run", g, "--backend", "c", "--input", f"buf0={tmp_path / 'x.npy'}", "--compare", "ref")
  assert rc == 2 and "[eval.input]" in text and "int32" in text, text   # without --cast: the input's dtype is named
  np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
  assert cli("run", g, "--backend", "c", "--input", f"buf0={tmp_path / 'x.npy'}", "--compare", "ref")[0] == 0
