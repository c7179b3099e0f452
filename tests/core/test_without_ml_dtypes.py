"""Without ml_dtypes (a dependency only bfloat16 *values* need) the tables, the validator
and the docs generator work alike -- bfloat16 intervals are bit arithmetic -- and the
reference evaluator refuses a bfloat16 graph by name instead of a traceback. The child
processes see an ml_dtypes module that fails to import."""
from __future__ import annotations
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BF16_GRAPH = {"format": "tinyspec-graph", "version": 1, "nodes": [
  {"op": "VCONST", "src": [], "arg": {"values": [3], "dtype": "index"}},
  {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "bfloat16", "device": "CPU"}},
  {"op": "CONST", "src": [], "arg": {"value": 1.00390625, "dtype": "bfloat16"}},
  {"op": "ADD", "src": [1, 2]}]}


def _run(tmp_path, *args):
  shim = tmp_path / "shim"
  shim.mkdir(exist_ok=True)
  (shim / "ml_dtypes.py").write_text("raise ImportError('ml_dtypes is not installed here')\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shim), str(ROOT)]))
  return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_docs_generate_without_ml_dtypes(tmp_path):
  r = _run(tmp_path, "tools/gen_docs.py", "--check")
  assert r.returncode == 0, r.stderr[-3000:]


def test_bfloat16_graphs_validate_and_are_refused_by_name(tmp_path):
  path = tmp_path / "bf16.json"
  path.write_text(json.dumps(BF16_GRAPH))
  v = _run(tmp_path, "-m", "tinyspec.cli", "validate", str(path))
  assert v.returncode == 0 and "valid" in v.stdout, v.stderr[-3000:]
  # the CONST's interval is on the bfloat16 grid: 1 + 2^-8 rounds to even (1.0)
  p = _run(tmp_path, "-c", "from tinyspec.intervals import iv_const; print(iv_const(1.00390625, 'bfloat16'))")
  assert p.returncode == 0 and p.stdout.strip() == "(1.0, 1.0)", (p.stdout, p.stderr[-2000:])
  e = _run(tmp_path, "-m", "tinyspec.cli", "eval", str(path), "--out", str(tmp_path / "out"))
  assert e.returncode == 1, (e.returncode, e.stderr[-3000:])
  assert "Traceback" not in e.stderr and "ml_dtypes" in e.stderr and "[eval.unsupported]" in e.stderr, e.stderr[-3000:]
