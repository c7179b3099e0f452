"""docs/tinygrad-bugs.md against tinygrad, the manifests and the hunt's signatures: every
expected failure of the tinygrad backend names a bug there, every bug has a signature in
interop/tinygrad_bugs.yaml, and every bug's repro (a Python block run on tinygrad
alone, on each device its `# devices:` line lists) still reproduces: it fails, raises or
dies by a signal. The PYTHON and CPU repros run by default (a second or two each); CL
(PoCL) ones with TINYSPEC_TINYGRAD_LONG=1."""
from __future__ import annotations
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tinygrad-bugs.md"
MANIFESTS = sorted((ROOT / "conformance" / "manifests").glob("tinygrad-*.yaml"))
LONG = os.environ.get("TINYSPEC_TINYGRAD_LONG") == "1"


def bugs() -> dict[str, list[tuple[list[str], str | None, str]]]:
  """bug id -> [(devices, the signal it dies by or None, code)] from the doc's sections."""
  out: dict = {}
  for part in re.split(r"^### ", DOC.read_text(), flags=re.M)[1:]:
    name = part.split("\n", 1)[0].strip()
    blocks = re.findall(r"```python\n(.*?)```", part, flags=re.S)
    for code in blocks:
      head = re.match(r"# devices: ([A-Z ]+?)(?:\s+signal: (\w+))?\n", code)
      assert head, f"{name}: a repro starts with '# devices: ...'"
      out.setdefault(name, []).append((head.group(1).split(), head.group(2), code))
    assert name in out, f"{name}: no repro"
  return out


def test_the_doc_lists_every_bug_it_describes():
  table = set(re.findall(r"^\| \[([a-z0-9-]+)\]\(#", DOC.read_text(), flags=re.M))
  assert table == set(bugs())


def test_every_bug_has_a_signature_and_every_signature_a_bug():
  """interop/tinygrad_bugs.yaml (how `tinyspec fuzz --backend tinygrad` recognizes a finding
  as documented) names exactly the bugs of the doc, each with at least one signature."""
  sigs = yaml.safe_load((ROOT / "interop" / "tinygrad_bugs.yaml").read_text())["bugs"]
  assert set(sigs) == set(bugs()), f"in the doc only: {set(bugs()) - set(sigs)}; in the signatures only: {set(sigs) - set(bugs())}"
  for bug, entries in sigs.items():
    assert entries and all(isinstance(e, dict) and "kind" in e for e in entries), bug


def test_every_manifest_entry_is_a_documented_bug():
  assert {m.stem for m in MANIFESTS} >= {"tinygrad-CPU", "tinygrad-PYTHON"}
  known = set(bugs())
  for m in MANIFESTS:
    entries = yaml.safe_load(m.read_text())["expected_failures"]
    for case, why in entries.items():
      ids = re.findall(r"\[([a-z0-9-]+)\]", why)
      assert ids and all(i in known for i in ids), f"{m.name} {case}: {why!r} names no bug of docs/tinygrad-bugs.md"
      device = m.stem.split("-", 1)[1]
      assert any(device in devs for i in ids for devs, _, _ in bugs()[i]), f"{m.name} {case}: no repro of {ids} runs on {device}"


def _runs_here(device: str) -> str | None:
  """Why a device cannot run here, or None."""
  try: import tinygrad  # noqa: F401
  except ImportError: return "tinygrad is not installed"
  if device == "CPU" and shutil.which("clang") is None: return "tinygrad's CPU device needs clang"
  if device == "CL":
    try: import pyopencl  # noqa: F401
    except ImportError: return "pyopencl (PoCL) is not installed"
  if device not in ("PYTHON", "CPU", "CL"): return f"no {device} device here"
  if device == "CL" and not LONG: return "CL repros run with TINYSPEC_TINYGRAD_LONG=1"
  return None


REPROS = [(name, k, dev) for name, rs in sorted(bugs().items()) for k, (devs, _, _) in enumerate(rs) for dev in devs]


@pytest.mark.parametrize("name,k,device", REPROS, ids=[f"{n}-{k}-{d}" for n, k, d in REPROS])
def test_the_repro_still_reproduces(name, k, device, tmp_path):
  why = _runs_here(device)
  if why: pytest.skip(why)
  devs, sig, code = bugs()[name][k]
  script = tmp_path / "repro.py"
  prelude = ""
  env = {**os.environ, "DEV": device, "PYTHONPATH": ""}
  env.pop("TINYSPEC_TINYGRAD_DEVICE", None)
  if device == "CL":   # PoCL through pyopencl's libOpenCL: pyopencl loads it first (see the doc's header)
    from tinyspec.interop.tinygrad_backend import open_cl
    open_cl()
    env["OPENCL_PATH"] = os.environ.get("OPENCL_PATH", "")
    prelude = "import pyopencl\n"
  script.write_text(prelude + code)
  p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
  if sig: assert p.returncode == -getattr(signal, sig), f"{name} on {device}: expected death by {sig}, got {p.returncode}\n{p.stdout}{p.stderr}"
  else: assert p.returncode != 0 and re.search(r"(Error|Exception)", p.stderr), f"{name} on {device} does not reproduce (fixed?):\n{p.stdout}{p.stderr}"
