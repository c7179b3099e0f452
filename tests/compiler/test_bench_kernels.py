"""bench/bench_kernels.py's own machinery, cheaply (its figures are for people, not tests):
the JSON document, the check of every result before it is timed (a planted wrong result
is reported, not timed, and fails the run), the GPU mode without torch/CUDA."""
from __future__ import annotations
import json
import sys
from pathlib import Path
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_kernels as B  # noqa: E402

QUICK = ["--scale", "4096", "--runs", "1", "--no-tinygrad", "--targets", "c"]


def test_json_has_every_figure(tmp_path):
  out = tmp_path / "b.json"
  assert B.main(QUICK + ["--cases", "add,sum,gemm", "--json", str(out)]) == 0
  doc = json.loads(out.read_text())
  assert doc["columns"] == ["numpy", "c"] and doc["host"] and doc["threads"] >= 1
  names = [r["case"] for r in doc["cases"]]
  assert names[:2] == ["add 4096", "sum 4096"] and any(n.startswith("gemm") for n in names)
  for r in doc["cases"]:
    assert r["check"] == {"c": "ok"} and r["baseline"] == "numpy"
    assert r["ms"]["numpy"] > 0 and r["ms"]["c"] > 0
    assert r["ratio"]["c"] == pytest.approx(r["baseline_ms"]["c"] / r["ms"]["c"])     # within its own rounds
    assert r["gbs"]["c"] == pytest.approx(r["bytes"] / (r["ms"]["c"] * 1e-3) / 1e9)
    assert r["gflops"]["c"] == pytest.approx(r["flops"] / (r["ms"]["c"] * 1e-3) / 1e9)
  gemm = next(r for r in doc["cases"] if r["case"].startswith("gemm"))
  m = int(gemm["case"].split()[1])
  assert gemm["flops"] == 2 * m ** 3


def test_read_ceiling_is_timed_with_the_reductions(tmp_path):
  """The reductions that only read (sum, max) get the read ceiling, timed against NumPy in
  rounds of its own; "best" is NumPy's time over it."""
  out = tmp_path / "b.json"
  assert B.main(QUICK + ["--cases", "add,sum,max", "--json", str(out)]) == 0
  doc = json.loads(out.read_text())
  by = {r["case"].split()[0]: r for r in doc["cases"]}
  assert "best_ratio" not in by["add"] and "ceiling_ms" not in by["add"]   # it writes as much as it reads
  for k in ("sum", "max"):
    r = by[k]
    assert "read ceiling" not in r["ms"] and r["ceiling_ms"] > 0     # not a column of the table
    assert r["best_ratio"] == pytest.approx(r["ceiling_numpy_ms"] / r["ceiling_ms"])
    assert r["ceiling_gbs"] == pytest.approx(r["bytes"] / (r["ceiling_ms"] * 1e-3) / 1e9)


def test_read_probe_reads_a_copy():
  """The probe reads its own copy (as our bound kernel does), never the caller's array."""
  x = np.arange(4096, dtype=np.float32)
  before = x.copy()
  once = B.read_probe([x])
  once(); once()
  assert np.array_equal(x, before)
  assert once.__defaults__[0] is not x and once.__defaults__[0].size == x.size


def test_json_to_stdout(capsys):
  assert B.main(QUICK + ["--cases", "max 4096", "--json", "-"]) == 0
  doc = json.loads(capsys.readouterr().out)          # the table goes to stderr then
  assert [r["case"] for r in doc["cases"]] == ["max 4096"]


def test_wrong_result_is_reported_not_timed(tmp_path, monkeypatch, capsys):
  real = B.ours
  def planted(target, build, arrays, beam):
    f, res = real(target, build, arrays, beam)
    return f, np.asarray(res) + 1                    # a miscompiled kernel
  monkeypatch.setattr(B, "ours", planted)
  out = tmp_path / "b.json"
  assert B.main(QUICK + ["--cases", "add", "--json", str(out)]) == 1
  (r,) = json.loads(out.read_text())["cases"]
  assert r["check"] == {"c": "WRONG RESULT"} and "c" not in r["ms"] and "c" not in r["ratio"]
  assert "WRONG RESULTS: add 4096: c" in capsys.readouterr().out


def test_gpu_mode_without_torch_still_measures(tmp_path, monkeypatch):
  monkeypatch.setattr(B, "torch_cuda", lambda: (None, "torch unavailable (test)"))
  out = tmp_path / "b.json"
  assert B.main(QUICK + ["--gpu", "--cases", "sum", "--peak", "h100", "--json", str(out)]) == 0
  doc = json.loads(out.read_text())
  assert doc["torch"] == "torch unavailable (test)" and doc["columns"] == ["numpy", "c"]
  assert doc["peak"]["peak_gbs"] == 3350 and doc["cases"][0]["baseline"] == "numpy"


def test_torch_expressions_match_numpy():
  """The torch column computes what the case computes (checked on NumPy stand-ins for the
  ops torch shares with it)."""
  assert set(B.TORCH_EXPR) == {"add", "a*b+c", "sum", "max", "softmax", "gemm", "conv3x3"}
  names = {c[0].split()[0] for c in B.cases(np.random.default_rng(0), 1 << 16)}
  assert names == set(B.TORCH_EXPR)


def test_numpy_runs_its_own_kernels_not_pinned_ones(tmp_path):
  """OPENBLAS_CORETYPE pins OpenBLAS to another CPU's kernels (Haswell's on an AVX-512 host:
  gemm 2x slower); the benchmark runs itself again without it and says which kernels ran."""
  import os
  import subprocess
  out = tmp_path / "b.json"
  env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}
  p = subprocess.run([sys.executable, str(Path(B.__file__)), *QUICK, "--cases", "gemm", "--json", str(out)], env=env,
                     capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  assert "running without OPENBLAS_CORETYPE=Haswell" in p.stderr
  doc = json.loads(out.read_text())
  assert doc["openblas_env"] == {} and doc["blas"]["kernels"]
  p = subprocess.run([sys.executable, str(Path(B.__file__)), *QUICK, "--cases", "gemm", "--json", str(out), "--keep-openblas-env"],
                     env=env, capture_output=True, text=True, timeout=600)
  assert json.loads(out.read_text())["openblas_env"] == {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}
  assert json.loads(out.read_text())["blas"]["kernels"] == "Haswell"
