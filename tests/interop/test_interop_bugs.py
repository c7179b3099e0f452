"""The tinygrad ledger (docs/tinygrad-bugs.md) against tinygrad, its signatures, the manifests
and the README: every entry has a class (bug, divergence, undefined) that the doc, the table,
interop/tinygrad_bugs.yaml and the counts agree on; every expected failure of the tinygrad
backend names an entry; every repro (a Python block run on tinygrad alone, on the devices its
`# devices:` line lists) still fails, raises or dies by its signal; and every cause block (a
patch of tinygrad, `# cause:`) passes.

Cheap by default: each repro on one device here (CPU where clang is installed, else PYTHON),
the ones that need no process of their own run together in one child process; each cause
block on that device. TINYSPEC_TINYGRAD_LONG=1 runs every block on every device it lists,
CL (PoCL) included."""
from __future__ import annotations
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tinygrad-bugs.md"
MANIFESTS = sorted((ROOT / "conformance" / "manifests").glob("tinygrad-*.yaml"))
LONG = os.environ.get("TINYSPEC_TINYGRAD_LONG") == "1"
CLASSES = {"bug": "(a)", "divergence": "(b)", "undefined": "(c)"}


def sections() -> dict[str, dict]:
  """entry id -> {class, blocks: [(kind repro|cause, devices, signal or None, code)]} from the doc."""
  out: dict = {}
  for part in re.split(r"^### ", DOC.read_text(), flags=re.M)[1:]:
    name = part.split("\n", 1)[0].strip()
    cls = re.search(r"^Class: (\w+)", part, flags=re.M)
    assert cls, f"{name}: no 'Class:' line"
    blocks = []
    for code in re.findall(r"```python\n(.*?)```", part, flags=re.S):
      head = re.match(r"# (devices|cause): ([A-Z ]+?)(?:\s+signal: (\w+))?\n", code)
      assert head, f"{name}: a block starts with '# devices: ...' (a repro) or '# cause: ...' (its diagnosis)"
      blocks.append(("repro" if head.group(1) == "devices" else "cause", head.group(2).split(), head.group(3), code))
    assert any(k == "repro" for k, *_ in blocks), f"{name}: no repro"
    out[name] = {"class": cls.group(1), "blocks": blocks}
  return out


def ledger() -> dict:
  return yaml.safe_load((ROOT / "interop" / "tinygrad_bugs.yaml").read_text())["entries"]


def test_the_table_the_sections_and_the_signatures_list_the_same_entries_in_the_same_classes():
  doc = sections()
  table = dict(re.findall(r"^\| \[([a-z0-9-]+)\]\(#[a-z0-9-]+\) \| (\w+) \|", DOC.read_text(), flags=re.M))
  sigs = ledger()
  assert set(table) == set(doc) == set(sigs), f"table only: {set(table) - set(doc)}; doc only: {set(doc) - set(sigs)}; yaml only: {set(sigs) - set(doc)}"
  for name, s in doc.items():
    assert s["class"] == table[name] == sigs[name]["class"], f"{name}: class {s['class']} (section), {table[name]} (table), {sigs[name]['class']} (yaml)"
    assert s["class"] in CLASSES
    assert sigs[name]["signatures"] and all("kind" in e for e in sigs[name]["signatures"]), name


def test_each_class_sits_under_its_heading():
  """A section's class is the class of the part of the doc it is in: (a), (b), (c)."""
  doc = sections()
  for part in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
    label = part[:3]
    if label not in CLASSES.values(): continue
    for name in re.findall(r"^### ([a-z0-9-]+)", part, flags=re.M):
      assert CLASSES[doc[name]["class"]] == label, f"{name} ({doc[name]['class']}) is under {part.splitlines()[0]}"


def test_the_counts_of_the_doc_and_the_readme_are_the_ledger_s():
  """The bug count the README and the doc give is class (a) only, and the doc's upstream
  count is its table's "not found" bugs."""
  n = Counter(e["class"] for e in ledger().values())
  text = DOC.read_text()
  head = re.search(r"\*\*Counts \(tinygrad 0.14.0\): (\d+) bugs \(a\), (\d+) of them not found upstream; (\d+) divergences \(b\); (\d+)\s+undefined inputs \(c\)\.\*\*", text)
  assert head, "the doc's counts line"
  not_found = sum(1 for cls, up in re.findall(r"^\| \[[a-z0-9-]+\]\(#[a-z0-9-]+\) \| (\w+) \|[^|]*\|[^|]*\| ([^|]*) \|$", text, flags=re.M)
                  if cls == "bug" and up.strip().startswith("not found"))
  assert tuple(int(x) for x in head.groups()) == (n["bug"], not_found, n["divergence"], n["undefined"])
  readme = (ROOT / "README.md").read_text()
  m = re.search(r"\*\*(\d+) tinygrad 0.14 bugs\*\*[^;]*?\((\d+) not found upstream\), apart from (\d+) divergences[^;]*?and\s+(\d+) undefined inputs", readme, flags=re.S)
  assert m and tuple(int(x) for x in m.groups()) == (n["bug"], not_found, n["divergence"], n["undefined"]), "README's tinygrad ledger counts"


def test_every_manifest_entry_names_a_ledger_entry_with_a_repro_on_its_device():
  assert {m.stem for m in MANIFESTS} >= {"tinygrad-CPU", "tinygrad-PYTHON"}
  doc = sections()
  for m in MANIFESTS:
    device = m.stem.split("-", 1)[1]
    for case, why in yaml.safe_load(m.read_text())["expected_failures"].items():
      ids = re.findall(r"\[([a-z0-9-]+)\]", why)
      assert ids and all(i in doc for i in ids), f"{m.name} {case}: {why!r} names no entry of docs/tinygrad-bugs.md"
      assert any(device in devs for i in ids for k, devs, _, _ in doc[i]["blocks"] if k == "repro"), f"{m.name} {case}: no repro of {ids} runs on {device}"


# ------------------------------------------------------------------ running the blocks
def _runs_here(device: str) -> str | None:
  """Why a device cannot run here, or None."""
  try: import tinygrad  # noqa: F401
  except ImportError: return "tinygrad is not installed"
  if device == "CPU" and shutil.which("clang") is None: return "tinygrad's CPU device needs clang"
  if device == "CL":
    try: import pyopencl  # noqa: F401
    except ImportError: return "pyopencl (PoCL) is not installed"
  if device not in ("PYTHON", "CPU", "CL"): return f"no {device} device here"
  return None


def _default_device() -> str:
  return "CPU" if _runs_here("CPU") is None else "PYTHON"


def _jobs() -> list[tuple[str, int, str]]:
  """(entry, block index, device) to run: every listed device with LONG, else one device here."""
  out = []
  for name, s in sorted(sections().items()):
    for k, (_, devs, _, _) in enumerate(s["blocks"]):
      if LONG: out += [(name, k, d) for d in devs]
      else:
        pick = next((d for d in (_default_device(), "PYTHON") if d in devs), None)
        if pick is not None: out.append((name, k, pick))
  return out


def _isolated(kind: str, sig, code: str) -> bool:
  """A block that needs a process of its own: a cause (it patches tinygrad), a signal, an
  environment set before tinygrad is imported."""
  return kind == "cause" or sig is not None or "os.environ[" in code or "os.environ.setdefault" in code


def _env(device: str) -> tuple[dict, str]:
  env = {**os.environ, "DEV": device, "PYTHONPATH": ""}
  env.pop("TINYSPEC_TINYGRAD_DEVICE", None)
  prelude = ""
  if device == "CL":   # PoCL through pyopencl's libOpenCL: pyopencl loads it first (see the doc's header)
    from tinyspec.interop.tinygrad_backend import open_cl
    open_cl()
    env["OPENCL_PATH"] = os.environ.get("OPENCL_PATH", "")
    prelude = "import pyopencl\n"
  return env, prelude


BATCH = r'''
import json, sys, traceback
for i, code in enumerate(json.loads(sys.stdin.read())):
  try:
    exec(compile(code, f"<block {i}>", "exec"), {"__name__": "__main__"})
    print(json.dumps({"i": i, "raised": None}), flush=True)
  except BaseException as e:
    print(json.dumps({"i": i, "raised": type(e).__name__, "message": str(e)[:300]}), flush=True)
'''


@pytest.fixture(scope="module")
def batched(tmp_path_factory) -> dict:
  """(entry, k, device) -> (exception type name or None, message): the blocks that need no
  process of their own, one child per device."""
  doc = sections()
  by_device: dict = {}
  for name, k, dev in _jobs():
    kind, _, sig, code = doc[name]["blocks"][k]
    if not _isolated(kind, sig, code) and _runs_here(dev) is None and (dev != "CL" or LONG):
      by_device.setdefault(dev, []).append((name, k, code))
  out = {}
  for dev, blocks in by_device.items():
    env, prelude = _env(dev)
    cwd = tmp_path_factory.mktemp(f"batch-{dev}")
    p = subprocess.run([sys.executable, "-c", prelude + BATCH], input=json.dumps([c for _, _, c in blocks]), capture_output=True,
                       text=True, cwd=cwd, env=env, timeout=900)
    for line in p.stdout.splitlines():
      try: r = json.loads(line)
      except ValueError: continue
      if isinstance(r, dict) and "i" in r:
        name, k, _ = blocks[r["i"]]
        out[(name, k, dev)] = (r["raised"], r.get("message", ""))
  return out


JOBS = _jobs()


@pytest.mark.parametrize("name,k,device", JOBS, ids=[f"{n}-{k}-{d}" for n, k, d in JOBS])
def test_the_block_still_does_what_the_ledger_says(name, k, device, tmp_path, batched):
  """A repro fails (raises, or dies by its signal) on its device; a cause block passes."""
  why = _runs_here(device) or (None if LONG or device != "CL" else "CL blocks run with TINYSPEC_TINYGRAD_LONG=1")
  if why: pytest.skip(why)
  kind, _, sig, code = sections()[name]["blocks"][k]
  if (name, k, device) in batched:
    raised, message = batched[(name, k, device)]
    if kind == "repro": assert raised is not None, f"{name} on {device} does not reproduce (fixed?)"
    else: assert raised is None, f"{name}'s cause block fails on {device}: {raised}: {message}"
    return
  env, prelude = _env(device)
  script = tmp_path / "block.py"
  script.write_text(prelude + code)
  p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
  if kind == "cause": assert p.returncode == 0, f"{name}'s cause block fails on {device}:\n{p.stdout}{p.stderr}"
  elif sig: assert p.returncode == -getattr(signal, sig), f"{name} on {device}: expected death by {sig}, got {p.returncode}\n{p.stdout}{p.stderr}"
  else: assert p.returncode != 0 and re.search(r"(Error|Exception)", p.stderr), f"{name} on {device} does not reproduce (fixed?):\n{p.stdout}{p.stderr}"
