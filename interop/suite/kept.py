"""The graphs a run kept (--tinygrad-suite-keep: DIR/failing/TEST/NAME.json, NAME.inputs.npz,
NAME.OUTPUT.npy), judged again with the code of now, without rerunning tinygrad's tests:

  --rediagnose  each disagreement no diagnosis showed is diagnosed again (a diagnosis added
                after the run classifies it)
  --recheck     each graph that failed validation or disagreed is validated, evaluated and
                compared again (a fix of the validator, the evaluator or the comparison made
                after the run counts), then diagnosed where it still disagrees

A graph that did not import was not kept: it stays as the run recorded it. The records are
changed in memory only (the report's figures); the files stay as the run wrote them.
"""
from __future__ import annotations
import re
from pathlib import Path
from types import SimpleNamespace
from tinyspec.files import load_npy, load_npz
from tinyspec.graph import load_file
from tinyspec.interop.suite.check import add_evidence
from tinyspec.interop.script import _evaluate_and_compare
from tinyspec.validate import validate
from tinyspec.interop.suite.diagnose import diagnose


def folder_name(test_id: str) -> str:
  """A test id as one folder name under DIR/failing/ (path separators and pytest's punctuation replaced)."""
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id).strip("._")[:200] or "test"


def load_kept(folder: Path, name: str):
  """Graph `name` kept in folder as a GraphResult-like object (level, graph, inputs, expected),
  or None where it is not there."""
  if not (folder / f"{name}.json").is_file(): return None
  g, _ = load_file(folder / f"{name}.json")
  if g is None: return None
  inputs = load_npz(folder / f"{name}.inputs.npz") if (folder / f"{name}.inputs.npz").is_file() else {}
  expected = {p.name[len(name) + 1:-4]: load_npy(p) for p in folder.glob(f"{name}.*.npy")}
  return SimpleNamespace(level=name.rsplit(".", 1)[-1], graph=g, inputs=inputs, expected=expected)


def rediagnose(records: list[dict], out, recheck: bool = False) -> int:
  """Judge the kept graphs again (see the module docstring); the records get the results.
  Returns how many graphs were judged again."""
  n = 0
  for rec in records:
    if rec.get("kind") != "schedule": continue
    for v in rec["graphs"]:
      again = recheck and v["stage"] in ("valid", "agree")
      if not again and (v["stage"] != "agree" or not v["error"].startswith("mismatch") or v.get("diagnoses")): continue
      g = load_kept(Path(out) / "failing" / folder_name(rec["test"]), v["name"])
      if g is None: continue
      n += 1
      if again: _recheck(v, g)
      if v["stage"] == "agree" and v["error"].startswith("mismatch"): _diagnose(v, g)
    add_evidence(rec)
  return n


def _recheck(v: dict, g) -> None:
  res = validate(g.graph)
  if not res.ok:
    d = res.diagnostics[0]
    v["stage"], v["error"] = "valid", f"[{d.rule}] {d.op}: {d.message}"[:400]
    return
  verdict = _evaluate_and_compare(g.graph, g.inputs, g.expected)[0]
  v["stage"], v["error"] = ("ok", "") if verdict.startswith("ok") else ("agree", verdict[:400])
  v.pop("diagnoses", None), v.pop("patterns", None)


def _diagnose(v: dict, g) -> None:
  v["diagnoses"], v["patterns"] = diagnose(g)
  v["ops"] = sorted({n.op for n in g.graph.nodes})
