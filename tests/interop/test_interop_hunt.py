"""The tinygrad hunt (interop/hunt.py, interop/repro.py, interop/campaign.py): findings are
sorted by the signatures of interop/tinygrad_bugs.yaml, the adapter's limits are never
failures, and a finding's repro.py runs on tinygrad alone (plain python, numpy and tinygrad
only) and fails the way the finding did. Adversaries: a documented bug hidden from the
signatures must come back as new with a repro that fails; a repro must not pass for a
wrong reason (a broken script is not a reproduction).

Skipped without tinygrad. tinygrad runs on CPU where clang is installed, else PYTHON.
"""
import ast
import os
import shutil
import random
from pathlib import Path
import numpy as np
import pytest

DEVICE = "CPU" if shutil.which("clang") else "PYTHON"
os.environ.setdefault("TINYSPEC_TINYGRAD_DEVICE", DEVICE)
pytest.importorskip("tinygrad")

from tinyspec.graph import Graph, Node   # noqa: E402
from tinyspec.conformance.fuzz.graphs import Drawn   # noqa: E402
from tinyspec.conformance.fuzz.checks import check_example   # noqa: E402
from tinyspec.conformance.fuzz.runners import InProcess, Isolated   # noqa: E402
from tinyspec.interop import hunt   # noqa: E402
from tinyspec.interop.repro import reproduces, MARK   # noqa: E402

ALLOWED_IMPORTS = {"numpy", "tinygrad", "math", "os", "sys"}


def _facts(**kw):
  base = {"kind": "ulp", "ops": set(), "dtypes": set(), "result": set(), "operand": set(), "sources": set(), "inputs": set(), "device": "CPU", "message": ""}
  base.update(kw)
  from tinyspec.dtypes import DTYPES
  base["classes"] = {DTYPES[x].cls for x in base["dtypes"] if x in DTYPES}
  return base


@pytest.mark.parametrize("facts,bug", [
  (dict(kind="ulp", ops={"SIN"}, dtypes={"float32"}, device="CPU"), "c-renderer-reassociates"),
  (dict(kind="ulp", ops={"SIN"}, dtypes={"float64"}, device="CPU"), "c-renderer-reassociates"),
  (dict(kind="ulp", ops={"SIN"}, dtypes={"float64"}, inputs={"huge"}, device="CPU"), "xsin-float64-large"),
  (dict(kind="ulp", ops={"SIN"}, dtypes={"float32"}, device="PYTHON"), None),
  (dict(kind="value", ops={"BITCAST"}, dtypes={"bool", "uint16"}, result={"bool"}, operand={"uint16"}, device="CPU"), "bitcast-bool-byte"),
  (dict(kind="signal:SIGFPE", ops={"IDIV", "BUFFER"}, dtypes={"int32"}, device="CPU"), "idiv-zero-trap"),
  (dict(kind="value", ops={"CMPLT"}, dtypes={"bool", "int8"}, result={"bool"}, operand={"int8"}, sources={"ADD", "CONST"}, device="PYTHON"), "lt-add-fold-wraps"),
  (dict(kind="ulp", ops={"ADD"}, dtypes={"float32"}, sources={"ADD", "CONST"}, device="CPU"), "float-const-reassociation"),
  (dict(kind="ulp", ops={"ADD"}, dtypes={"float32"}, sources={"ADD", "BUFFER"}, device="CPU"), "c-renderer-reassociates"),
  (dict(kind="not-nan", ops={"CAST"}, dtypes={"bfloat16", "float32"}, result={"bfloat16"}, operand={"float32"}, device="CPU"), "emulated-nan-to-inf"),
  (dict(kind="flush", ops={"WHERE"}, dtypes={"bfloat16"}, device="PYTHON"), "emulated-moves-flush"),
])
def test_signatures_pick_the_documented_bug(facts, bug):
  assert hunt.documented(_facts(**facts)) == bug


def test_signatures_use_only_known_keys_and_kinds():
  kinds = {"flush", "overflow", "nan", "not-nan", "sign", "ulp", "value"}
  assert {e["class"] for e in hunt.ledger().values()} <= set(hunt.CLASSES)
  for bug, sigs in hunt.signatures().items():
    for s in sigs:
      assert set(s) <= {"kind", "ops", "api", "dtypes", "result", "operand", "sources", "inputs", "devices", "message"}, (bug, s)
      for k in (s["kind"] if isinstance(s["kind"], list) else [s["kind"]]):
        assert k in kinds or k.startswith(("signal:", "error:")), (bug, k)


def test_difference_kinds():
  f32 = np.float32
  def kind(g, w, dt="float32"): return hunt.difference_kind(np.array(g, f32), np.array(w, f32), dt, np.ones(len(g), bool))
  assert kind([0.0], [1e-40]) == "flush"
  assert kind([np.inf], [3e38]) == "overflow"
  assert kind([np.nan], [1.0]) == "nan"
  assert kind([-np.inf], [np.nan]) == "not-nan"
  assert kind([np.inf], [-np.inf]) == "sign"
  assert kind([1.0000001], [1.0]) == "ulp"
  assert hunt.run_kind("RuntimeError: backend crash: the backend killed by SIGFPE") == "signal:SIGFPE"
  assert hunt.run_kind("RuntimeError: failed: ValueError: cannot convert float NaN to integer") == "error:ValueError"


def _tensor_drawn(op, dtype, values, const=None, arg=None):
  """op(BUFFER x[, CONST c]) at tensor level, every op node an output."""
  n = len(values)
  nodes = [Node("VCONST", [], {"values": [n], "dtype": "index"}), Node("BUFFER", [0], {"slot": 0, "dtype": dtype, "device": "CPU"})]
  if const is not None: nodes.append(Node("CONST", [], {"value": const, "dtype": dtype}))
  nodes.append(Node(op, list(range(1, len(nodes))), arg))
  x = np.array(values, dtype=dtype)
  return Drawn(Graph(nodes, None, "tensor"), {"buf0": x}, "tensor", {"out0": len(nodes) - 1}, {1: x})


def _imports(path: Path) -> set:
  out = set()
  for n in ast.walk(ast.parse(path.read_text())):
    if isinstance(n, ast.Import): out |= {a.name.split(".")[0] for a in n.names}
    elif isinstance(n, ast.ImportFrom): out.add((n.module or "").split(".")[0])
  return out


def _triage(f, out):
  from tinyspec.interop.tinygrad_backend import TinygradBackend
  return TinygradBackend(DEVICE).triage(f, out)


def _finding(d, isolate=False):
  runner = Isolated("tinygrad", 120) if isolate else InProcess("tinygrad")
  runner.profile = "portable"
  try: return check_example(d, runner, None, True)
  finally: runner.stop()


def test_a_hidden_bug_comes_back_new_with_a_repro_that_fails(tmp_path, monkeypatch):
  """x*0 of NaN and inf (mul-zero-fold), with its signature hidden: new, and its repro (the
  op alone, one element) fails on tinygrad; with the signature back it is documented."""
  d = _tensor_drawn("MUL", "float32", [np.nan, np.inf, 2.0], const=0.0)
  f = _finding(d)
  assert f is not None and f.prop == "values" and f.op == "MUL"
  sigs = {k: v for k, v in hunt.signatures().items() if k != "mul-zero-fold"}
  monkeypatch.setattr(hunt, "signatures", lambda: sigs)
  v = _triage(f, tmp_path)
  assert v.kind == "new" and v.facts["kind"] == "not-nan" and v.repro is not None, v.note
  assert _imports(v.repro) <= ALLOWED_IMPORTS
  text = v.repro.read_text()
  assert "x1 = Tensor(np.array([" in text and "np.nan" in text and ".alu(Ops.MUL" in text
  ok, out = reproduces(v.repro, DEVICE, "value")
  assert ok and "expected:" in out and "actual:" in out and MARK in out
  monkeypatch.undo()
  v2 = _triage(f, tmp_path / "again")
  assert v2.kind == "documented" and v2.bug == "mul-zero-fold" and v2.repro is not None
  # mul-zero-fold is a class (b) entry (symbolic.py: "this can be wrong for loaded NaN"): a known divergence, not a bug
  assert v2.ledger_class == "divergence" and v2.label == "divergence mul-zero-fold"


def test_a_planted_class_b_finding_is_a_divergence_and_a_class_a_one_a_bug():
  """Triage applies the ledger's classes: a finding matching a class (b) entry is a known
  divergence (x + 1e8 - 1e8 folded as reals), one matching a class (a) entry a bug
  (int8 (x + 100) < 50 rewritten), one matching (c) undefined (a SIGFPE of // by zero); the
  campaign's summary counts them by class."""
  cases = [(dict(kind="ulp", ops={"ADD"}, dtypes={"float32"}, sources={"ADD", "CONST"}, device="PYTHON"), "float-const-reassociation", "divergence"),
           (dict(kind="value", ops={"CMPLT"}, dtypes={"bool", "int8"}, result={"bool"}, operand={"int8"}, sources={"ADD", "CONST"}, device="CPU"), "lt-add-fold-wraps", "bug"),
           (dict(kind="signal:SIGFPE", ops={"IDIV", "BUFFER"}, dtypes={"int32"}, device="CPU"), "idiv-zero-trap", "undefined")]
  known = {}
  for facts, entry, cls in cases:
    bug = hunt.documented(_facts(**facts))
    v = hunt.Verdict("documented", bug, facts=_facts(**facts))
    assert (bug, v.ledger_class) == (entry, cls)
    known[bug] = 2
  assert hunt.class_counts(known) == {"divergence": {"float-const-reassociation": 2}, "bug": {"lt-add-fold-wraps": 2}, "undefined": {"idiv-zero-trap": 2}}
  assert hunt.Verdict("new", facts={}).ledger_class is None


def test_an_invalid_check_graph_is_tinyspec_s_not_a_new_tinygrad_bug(tmp_path):
  """A per-node check whose own graph the validator refuses (the campaign met one: AFTER with
  no sources) is tinyspec's failure, never reported as a tinygrad bug."""
  from tinyspec.conformance.fuzz.checks import Failure
  d = _tensor_drawn("ADD", "float32", [1.0, 2.0], const=1.0)
  f = Failure("values", 3, "ADD", "float32", "the reference evaluator cannot check this node: EvalError: node 0 (AFTER): "
              "the graph is invalid, nothing was evaluated", d)
  v = _triage(f, tmp_path)
  assert v.kind == "tinyspec" and v.repro is None and not list(tmp_path.rglob("repro.py"))


def test_a_composition_signature_matches_only_compositions():
  """`api` signatures (a Tensor method) never match a graph finding and `ops` ones never a
  composition finding: relu6's NaN at +inf is relu-difference-inf, a MUL's not-nan is not."""
  comp = _facts(kind="nan", ops=set(), dtypes={"float32"}, device="CPU")
  comp.update(api={"relu6"}, inputs={"inf"})
  assert hunt.documented(comp) == "relu-difference-inf"
  comp["inputs"] = {"finite"}
  assert hunt.documented(comp) is None
  graph = _facts(kind="nan", ops={"MUL"}, dtypes={"float32"}, device="CPU")
  assert hunt.documented(graph) != "relu-difference-inf"
  cos = _facts(kind="ulp", ops=set(), dtypes={"float32"}, device="CL")
  cos.update(api={"cos"}, inputs={"huge"})
  assert hunt.documented(cos) == "cos-phase" and hunt.entry_class("cos-phase") == "divergence"


def test_a_repro_that_does_not_fail_is_not_kept(tmp_path, monkeypatch):
  """A finding tinygrad does not reproduce standalone (here: a planted wrong value in the
  finding itself) keeps no repro.py and says why."""
  d = _tensor_drawn("ADD", "float32", [1.0, 2.0], const=1.0)
  f = _finding(d)
  assert f is None
  from tinyspec.conformance.fuzz.checks import Failure
  got = np.array([2.0, 4.0], np.float32)   # a planted wrong value: tinygrad really gives 2, 3
  f = Failure("values", 3, "ADD", "float32", "planted", d, {"got": got, "want": np.array([2.0, 3.0], np.float32), "bounds": 0.0,
              "alternatives": [], "operands": [np.array([1.0, 2.0], np.float32)], "sources": {1: np.array([1.0, 2.0], np.float32)}})
  monkeypatch.setattr(hunt, "signatures", lambda: {})
  v = _triage(f, tmp_path)
  assert v.kind == "new" and v.repro is None and "does not fail" in v.note
  assert not list(tmp_path.rglob("repro.py")) and list(tmp_path.rglob("not-reproduced.txt"))


@pytest.mark.skipif(DEVICE != "CPU", reason="the crash (SIGFPE) and the SIN polynomial are the CPU device's")
def test_a_crash_and_a_kernel_level_finding_get_repros(tmp_path, monkeypatch):
  monkeypatch.setattr(hunt, "signatures", lambda: {})
  x, z = np.array([7, -7], np.int32), np.zeros(2, np.int32)
  nodes = [Node("VCONST", [], {"values": [2], "dtype": "index"}), Node("BUFFER", [0], {"slot": 0, "dtype": "int32", "device": "CPU"}),
           Node("BUFFER", [0], {"slot": 1, "dtype": "int32", "device": "CPU"}), Node("IDIV", [1, 2])]
  d = Drawn(Graph(nodes, None, "tensor"), {"buf0": x, "buf1": z}, "tensor", {"out0": 3}, {1: x, 2: z})
  f = _finding(d, isolate=True)
  assert f is not None and "SIGFPE" in f.message
  v = _triage(f, tmp_path)
  assert v.kind == "new" and v.facts["kind"] == "signal:SIGFPE" and v.repro is not None, v.note
  # kernel level: SIN over a PARAM, through Tensor.custom_kernel
  nodes = [Node("CONST", [], {"value": 1, "dtype": "index"}), Node("RANGE", [0], {"id": 0, "type": "LOOP"}),
           Node("VCONST", [], {"values": [1], "dtype": "index"}), Node("PARAM", [2], {"slot": 0, "dtype": "float32"}),
           Node("INDEX", [3, 1]), Node("SIN", [4]), Node("PARAM", [2], {"slot": 1, "dtype": "float32"}),
           Node("INDEX", [6, 1]), Node("STORE", [7, 5]), Node("END", [8, 1]), Node("SINK", [9])]
  x = np.array([3.140625], np.float32)
  d = Drawn(Graph(nodes, None, "kernel"), {"param0": x}, "kernel", {"param1": 5}, {4: x})   # the load reads x
  f = _finding(d)
  assert f is not None and f.op == "SIN", f
  v = _triage(f, tmp_path / "k")
  assert v.kind == "new" and v.repro is not None, v.note
  assert "Tensor.custom_kernel" in v.repro.read_text() and _imports(v.repro) <= ALLOWED_IMPORTS


def test_adapter_limits_are_refused_not_failed():
  """A GROUP of stores in a kernel and a kernel that leaves PARAM slot 0 unused now run; a
  graph the adapter cannot build is refused with rule backend.unsupported."""
  from tinyspec.interop.tinygrad_backend import TinygradBackend, Refused
  b = TinygradBackend(DEVICE)
  nodes = [Node("CONST", [], {"value": 4, "dtype": "index"}), Node("RANGE", [0], {"id": 0, "type": "LOOP"}),
           Node("VCONST", [], {"values": [4], "dtype": "index"}),
           Node("PARAM", [2], {"slot": 1, "dtype": "float32"}), Node("PARAM", [2], {"slot": 2, "dtype": "float32"}),
           Node("CONST", [], {"value": 1.5, "dtype": "float32"}), Node("INDEX", [3, 1]), Node("INDEX", [4, 1]),
           Node("STORE", [6, 5]), Node("STORE", [7, 5]), Node("GROUP", [8, 9]), Node("END", [10, 1]), Node("SINK", [11])]
  out = b.run(Graph(nodes, None, "kernel"), {})
  assert out["param1"].tolist() == [1.5] * 4 and out["param2"].tolist() == [1.5] * 4
  g = Graph([Node("VCONST", [], {"values": [2], "dtype": "index"}), Node("BUFFER", [0], {"slot": 0, "dtype": "float32", "device": "CPU"}),
             Node("CONST", [], {"value": 0, "dtype": "index"}), Node("INDEX", [1, 2]), Node("CONST", [], {"value": 1.0, "dtype": "float32"}),
             Node("STORE", [3, 4])], None, "tensor")
  with pytest.raises(Refused) as e: b.run(g, {"buf0": np.zeros(2, np.float32)})
  assert e.value.rule == "backend.unsupported"


def test_drawn_programs_are_valid_tinygrad():
  """The campaign's program drawing builds valid graphs (a drawing error is the drawing's
  and would be reported as NOT_VALID, never as tinygrad's)."""
  import subprocess
  import sys
  from tinyspec.interop.campaign import draw_program, NOT_VALID
  rng = random.Random(3)
  srcs = [draw_program(rng).replace("x.realize()\n", "print(x.shape, x.dtype)\n") for _ in range(12)]
  code = "\n".join(f"exec({s!r}, {{}})" for s in srcs)
  env = {**os.environ, "DEV": "PYTHON"}
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
  assert p.returncode == 0 and NOT_VALID not in p.stderr, p.stderr[-2000:]
  assert len(p.stdout.strip().splitlines()) == 12


def test_campaign_prints_each_new_bug_once(tmp_path, monkeypatch, capsys):
  """A short campaign on the PYTHON device (one fuzz turn, one program turn): it sorts what
  it finds, prints its summary, and a key found twice is printed once."""
  from tinyspec.interop import campaign as C
  monkeypatch.setattr(C, "FUZZ_EXAMPLES", 4)
  monkeypatch.setattr(C, "PROGRAMS_PER_TURN", 1)
  lines = []
  from tinyspec.interop.tinygrad_backend import TinygradBackend
  rep = TinygradBackend("PYTHON").campaign(0.3, ["PYTHON"], tmp_path, seed=1, log=lines.append)
  assert rep.examples >= 1 and rep.programs >= 1
  assert any(line.startswith("campaign:") for line in lines)
  from tinyspec.interop.hunt import Verdict
  v = Verdict("new", facts={"ops": {"MUL"}, "classes": {"float"}, "device": "PYTHON", "kind": "not-nan"})
  class F:
    triage = v
    def __str__(self): return "planted"
  printed = []
  r = C.CampaignReport()
  C.record(r, F(), printed.append); C.record(r, F(), printed.append)
  assert len(printed) == 1 and r.repeats[v.key] == 1


def test_fuzz_cli_campaign_usage_errors(capsys):
  from tinyspec.cli import main
  assert main(["fuzz", "--backend", "tinygrad", "--campaign", "1", "--devices", "NOPE", "--out", "/tmp/unused-tinyspec-campaign"]) == 2
  assert "no tinygrad device NOPE" in capsys.readouterr().err
  assert main(["fuzz", "--backend", "ref", "--campaign", "1"]) == 2
  assert "has no campaign" in capsys.readouterr().err


def test_a_half_product_read_unrounded_is_allowed_and_a_dropped_cast_is_not():
  """Decision half-intermediates: tinygrad's CAST(MUL(a, b) float16, float32) is the exact
  product (its __fp16 / float32 emulation); the fuzz's per-node check accepts it (the
  variant recomputes the product unrounded), and under strict it is a failure. An explicit
  CAST to float16 that tinygrad drops (image-cast-fold) stays a failure in both."""
  a = np.array([1 + 2.0**-10, 3.0, 0.1], np.float16)
  nodes = [Node("VCONST", [], {"values": [3], "dtype": "index"}), Node("BUFFER", [0], {"slot": 0, "dtype": "float16", "device": "CPU"}),
           Node("BUFFER", [0], {"slot": 1, "dtype": "float16", "device": "CPU"}), Node("MUL", [1, 2]), Node("CAST", [3], "float32")]
  d = Drawn(Graph(nodes, [3, 4], "tensor"), {"buf0": a, "buf1": a}, "tensor", {"out0": 3, "out1": 4}, {1: a, 2: a})
  runner = InProcess("tinygrad")
  runner.profile = "portable"
  got = runner.run(d)["out1"]
  if np.array_equal(got, (a.astype(np.float32) * a).astype(np.float16).astype(np.float32)):
    pytest.skip("this device rounds the half product (the canonical answer)")
  assert check_example(d, runner, None, True) is None
  runner.profile = "strict"
  f = check_example(d, runner, None, True)
  assert f is not None and f.op == "CAST"
  x = np.array([3.7, 1 + 2.0**-12], np.float32)
  nodes = [Node("VCONST", [], {"values": [2], "dtype": "index"}), Node("BUFFER", [0], {"slot": 0, "dtype": "float32", "device": "CPU"}),
           Node("CAST", [1], "float16"), Node("CAST", [2], "float32")]
  runner.profile = "portable"
  d = Drawn(Graph(nodes, [2, 3], "tensor"), {"buf0": x}, "tensor", {"out0": 2, "out1": 3}, {1: x})
  f = check_example(d, runner, None, True)
  assert f is not None and f.op == "CAST" and hunt.documented(hunt.facts_of(f, DEVICE)) == "image-cast-fold"
