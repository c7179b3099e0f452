"""`tinyspec fuzz --backend tinygrad --campaign MINUTES --devices PYTHON,CPU,CL`: hunt tinygrad's
bugs on each device for a while and print each distinct new one once, with its repro.

Three kinds of search take turns on each device, until the time is spent (each turn a unit
on Dask distributed: interop/campaign_units.py, which runs the campaign):

* graphs: `tinyspec fuzz` rounds (conformance/fuzz/driver.py) drawn from the tables, every op
  in every dtype class, each finding sorted by interop/hunt.py;
* programs: tensor programs drawn the way models use tinygrad (`draw_program`: matmuls,
  conv-like windows, pooling, softmax, cumsum, reductions, movement, float16/bfloat16 and
  integer narrowing, chained), run through tinygrad's own scheduler and optimizer by
  `tinyspec import-tinygrad` in a child process (a crash is a finding, not the end of the
  campaign), compared with the reference within the portable profile's error bound. Where
  tinygrad's result is outside it, the program's tensor graph is checked node by node
  (every node an output, through the tinygrad backend) to find the op that diverges; that
  finding is sorted like any other, and its repro is the op alone;
* compositions: tinygrad's Tensor-API methods (relu6, logcumsumexp, softplus, cumprod, pow,
  ...) on special values, judged against their documented meaning (interop/compositions.py).

A new bug is keyed by op, dtype class, device and kind of difference (hunt.Verdict.key):
the campaign prints the first of each key (with its repro) and counts the rest.
"""
from __future__ import annotations
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
import hashlib
from tinyspec.dispatch import input_name
from tinyspec.interop.tinygrad_device import have_clang, open_cl
from tinyspec.interop.compositions import CASES_PER_TURN, composition_turn
from tinyspec.files import make_dir, write_file, load_npz
from tinyspec.interop.tinygrad_names import _backend_table
from tinyspec.graph import Graph, Node
from tinyspec.validate import validate
from tinyspec.tables import tables

DEVICES = ("PYTHON", "CPU", "CL")
FUZZ_EXAMPLES = 60      # graphs per fuzz turn
PROGRAMS_PER_TURN = 4   # programs per program turn
PROGRAM_TIMEOUT = 300   # seconds one program's import may take
NOT_VALID = "the drawn program is not valid tinygrad"


@dataclass
class CampaignReport:
  new: dict = field(default_factory=dict)            # Verdict.key -> (Verdict, the finding's text)
  known: Counter = field(default_factory=Counter)    # documented bug -> findings
  unsupported: Counter = field(default_factory=Counter)
  repeats: Counter = field(default_factory=Counter)  # Verdict.key -> further findings of a new bug
  examples: int = 0
  programs: int = 0
  compositions: int = 0
  seconds: float = 0.0


def _unavailable(dev: str) -> str | None:
  if dev == "CPU" and not have_clang(): return "tinygrad's CPU device needs clang"
  if dev == "CL":
    try: import pyopencl  # noqa: F401, PLC0415 (pyopencl, an optional dependency: the opencl extra)
    except ImportError: return "pyopencl (PoCL) is not installed"
  return None


class _device:
  """TINYSPEC_TINYGRAD_DEVICE set for the backend processes started inside."""
  def __init__(self, dev): self.dev = dev
  def __enter__(self):
    self.old = os.environ.get("TINYSPEC_TINYGRAD_DEVICE")
    os.environ["TINYSPEC_TINYGRAD_DEVICE"] = self.dev
  def __exit__(self, *exc):
    if self.old is None: os.environ.pop("TINYSPEC_TINYGRAD_DEVICE", None)
    else: os.environ["TINYSPEC_TINYGRAD_DEVICE"] = self.old


def _key_text(key) -> str:
  ops, classes, dev, kind = key
  return f"{'/'.join(ops)} {'/'.join(classes)} on {dev}: {kind}"


def record(rep: CampaignReport, f, log) -> None:
  """One sorted finding into the report; the first of each new key is printed at once."""
  v = f.triage
  if v is None: return
  if v.kind == "documented": rep.known[v.bug] += 1
  elif v.kind == "unsupported": rep.unsupported[v.why] += 1
  elif v.kind == "new":
    if v.key in rep.new: rep.repeats[v.key] += 1
    else:
      rep.new[v.key] = (v, str(f))
      log(f"NEW BUG {_key_text(v.key)}: {f}\n  repro: {v.repro or 'none kept (' + v.note[:200] + ')'}")


def _fuzz_turn(rep, dev, seed, out, triage, log, examples: int = FUZZ_EXAMPLES, database=None, database_key=None) -> None:
  from tinyspec.conformance.fuzz.driver import fuzz  # noqa: PLC0415 (hypothesis, a test extra: only the fuzz turn needs it)
  r = fuzz("tinygrad", examples, seed, out, stages=False, triage=triage, timeout=120, database=database, database_key=database_key)
  rep.examples += r.examples
  for f in [*r.failures, *r.known]: record(rep, f, log)
  for why, n in r.unsupported.items(): rep.unsupported[why] += n


def _composition_turn(rep, dev, rng, out, log, deadline) -> None:
  if time.monotonic() >= deadline: return
  rep.compositions += CASES_PER_TURN
  for f in composition_turn(dev, rng, out, deadline): record(rep, f, log)


# ------------------------------------------------------------------ programs
def _program_turn(rep, dev, rng, out, triage, log, deadline) -> None:
  for _ in range(PROGRAMS_PER_TURN):
    if time.monotonic() >= deadline: return
    src = draw_program(rng)
    rep.programs += 1
    for f in hunt_program(src, dev, out, triage): record(rep, f, log)


def draw_program(rng: random.Random) -> str:
  """A small tinygrad program as a model writes one: inputs from a seeded generator (edge
  values mixed in), then 2 to 5 steps, each a typical layer or tensor op."""
  seed = rng.randrange(2**31)
  float_dt = rng.choice(["float32", "float32", "float16", "bfloat16"])
  R, C = rng.choice([3, 4, 8, 16]), rng.choice([4, 5, 8, 16, 33])
  lines = ['"""A tensor program drawn by tinyspec\'s tinygrad campaign (interop/campaign.py)."""',
           "import numpy as np", "from tinygrad import Tensor, dtypes", f"rng = np.random.default_rng({seed})",
           "def data(*shape, scale=1.0):",
           "  a = rng.standard_normal(shape).astype(np.float32) * scale",
           "  edge = np.array([0.0, -0.0, 1e-3, -1e4, 65504.0, 3.0e38, 1e-40, 7.0], np.float32)",
           "  m = rng.random(shape) < 0.15",
           "  a[m] = rng.choice(edge, size=int(m.sum()))",
           "  return a"]
  if rng.random() < 0.3:   # integer program: narrowing, division, shifts
    idt = rng.choice(["int8", "uint8", "int16", "int32"])
    lines += [f"x = Tensor(rng.integers(-300, 300, ({R}, {C})).astype(np.int32)).realize()",
              f"y = Tensor(rng.integers(1, 9, ({R}, {C})).astype(np.int32)).realize()"]
    steps = [f"x = x.cast(dtypes.{idt})", "x = x // 3 + 7", "x = (x * 3) % 5", "x = x + y.cast(x.dtype)", "x = (x < 4).where(x, x - 100)",
             "x = x.cumsum(1)", "x = x.max(1, keepdim=True) + x", "x = (x << 2) >> 1", "x = x.cast(dtypes.int32) * 70000", "x = x.flip(0).pad(((1, 0), (0, 1)))[:-1, 1:]"]
    body = [steps[0]] + rng.sample(steps[1:], rng.randint(2, 4))
  else:
    lines += [f"x = Tensor(data({R}, {C})).realize()", f"w = Tensor(data({C}, {C}, scale=0.5)).realize()"]
    to = "" if float_dt == "float32" else f".cast(dtypes.{float_dt})"
    win = f"x.reshape(1, 1, {R}, {C})"   # every step keeps the shape ({R}, {C})
    steps = [f"x = x{to}", f"x = x @ w{to}", "x = x.softmax(-1)", "x = x.log_softmax(-1)", "x = x.relu() - 0.5",
             "x = x.gelu()", "x = x.sigmoid() * x", "x = x.tanh()", "x = (x.abs() + 1).log()", "x = x.abs().sqrt()",
             "x = x.cumsum(1)", "x = x.sum(1, keepdim=True) + x", "x = x.max(0, keepdim=True) - x", "x = x.mean(1, keepdim=True) * x",
             "x = x.layernorm()", "x = x.transpose(0, 1).contiguous().transpose(0, 1)", "x = x.pad(((1, 1), (0, 2)))[1:-1, :-2]",
             "x = x.flip(1) * 0.5 + x", "x = (x > 0).where(x, x * 0.1)", f"x = x.cast(dtypes.{float_dt}).float() * 2",
             f"x = {win}.pad(((0, 0), (0, 0), (0, 0), (0, 1))).avg_pool2d((1, 2), stride=1).reshape({R}, {C})",
             f"x = {win}.pad(((0, 0), (0, 0), (1, 0), (0, 0))).max_pool2d((2, 1), stride=1).reshape({R}, {C})",
             f"x = {win}.pad(((0, 0), (0, 0), (0, 1), (0, 1))).conv2d(Tensor.ones(1, 1, 2, 2, dtype=x.dtype) * 0.25).reshape({R}, {C})",
             "x = x * 1e-3 + 1e4", "x = x.exp2() - 1", "x = x.square().sum(1).sqrt().reshape(-1, 1) + x"]
    body = [steps[0]] + rng.sample(steps[1:], rng.randint(2, 5))
  return "\n".join(lines + ["try:   # building the graph: an error here is the drawing's, not tinygrad's"] + ["  " + b for b in body]
                   + ["except Exception as e:", f"  raise SystemExit(f'{NOT_VALID}: {{type(e).__name__}}: {{e}}')", "x.realize()", ""])


def hunt_program(src: str, device: str, out: Path, triage) -> list:
  """Run a drawn program through `tinyspec import-tinygrad` on device: [] when every graph
  matches; else the findings (conformance/fuzz/checks.Failure, sorted by triage)."""
  name = "program-" + hashlib.sha256(src.encode()).hexdigest()[:10]
  folder = make_dir(Path(out) / "programs" / name)
  script = folder / "program.py"
  write_file(script, src)
  env = {**os.environ, "DEV": device}
  env.pop("TINYSPEC_TINYGRAD_DEVICE", None)
  emulate = [x for x in env.get("EMULATED_DTYPES", "").split(",") if x] + list(_backend_table()["emulate"])   # as the backend runs them
  env["EMULATED_DTYPES"] = ",".join(dict.fromkeys(emulate))
  cmd = [sys.executable, "-m", "tinyspec.cli"]
  if device == "CL":   # PoCL through pyopencl's libOpenCL: loaded before tinygrad opens CL (tinygrad_device.open_cl)
    open_cl()
    env["OPENCL_PATH"] = os.environ.get("OPENCL_PATH", "")
    cmd = [sys.executable, "-c", "import sys, pyopencl; from tinyspec.cli import main; sys.exit(main(sys.argv[1:]))"]
  try:
    p = subprocess.run([*cmd, "import-tinygrad", str(script), "--out", str(folder / "import"), "--json"],
                       capture_output=True, text=True, env=env, timeout=PROGRAM_TIMEOUT, cwd=str(folder))
  except subprocess.TimeoutExpired:
    return []   # too slow to judge here (the graph fuzz covers hangs)
  try: summary = json.loads(p.stdout)
  except ValueError: summary = None
  if summary is None:   # the import died (a crash of tinygrad in the child): the program itself is the repro
    return [_program_failure(src, f"run: the program: backend crash: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}", triage, out)]
  if summary.get("error") and NOT_VALID not in summary["error"]:
    return [_program_failure(src, f"run: the program: failed: {summary['error']}", triage, out)]
  bad = [g for g in summary.get("graphs", []) if g["level"] == "tensor" and g["evaluation"].startswith("mismatch")]
  out_f = []
  for g in bad:
    f = _localize(folder / "import", g["name"], device, triage, out)
    if f is not None: out_f.append(f)
  return out_f


def _program_failure(src, message, triage, out):
  """A failure of a whole program (a crash or an exception in tinygrad): sorted by its kind."""
  from tinyspec.conformance.fuzz.checks import Failure  # noqa: PLC0415 (hypothesis, a test extra: only a failing program needs it)
  from tinyspec.conformance.fuzz.graphs import Drawn  # noqa: PLC0415 (hypothesis, a test extra: only a failing program needs it)
  f = Failure("run", None, None, None, message, Drawn(Graph([Node("VCONST", [], {"values": [], "dtype": "index"})]), {}))
  f.triage = triage(f, None)
  if f.triage is not None and f.triage.kind == "new": f.triage.note = f"the program: {src[:2000]}"
  return f


def _localize(folder: Path, name: str, device: str, triage, out):
  """The first node of an imported tensor graph whose tinygrad value is not the reference's
  op on tinygrad's own operands (every node an output, through the tinygrad backend)."""
  from tinyspec.conformance.fuzz.graphs import Drawn  # noqa: PLC0415 (hypothesis, a test extra: only localizing a failing program needs it)
  from tinyspec.conformance.fuzz.runners import Isolated  # noqa: PLC0415 (hypothesis, a test extra: only localizing a failing program needs it)
  from tinyspec.conformance.fuzz.checks import check_example  # noqa: PLC0415 (hypothesis, a test extra: only localizing a failing program needs it)
  g = Graph.loads((folder / f"{name}.json").read_text())
  inputs = dict(load_npz(folder / f"{name}.inputs.npz")) if (folder / f"{name}.inputs.npz").exists() else {}
  res = validate(g)
  if not res.ok: return None
  T = tables()
  roots = [i for i, (n, v) in enumerate(zip(g.nodes, res.views))   # the values the program computes: no storage, no shape operands
           if isinstance(getattr(v, "dtype", None), str) and v.dtype not in ("void", "index")
           and (n.op in T.alu_ops or T.ops[n.op].category in ("movement", "reduce")) and T.ops[n.op].storage is None]
  if not roots: return None
  values = {i: inputs[input_name(n.op, n.arg)] for i, n in enumerate(g.nodes)
            if n.op == "BUFFER" and input_name(n.op, n.arg) in inputs}
  d = Drawn(Graph(g.nodes, roots, "tensor"), inputs, "tensor", {f"out{k}": r for k, r in enumerate(roots)}, values)
  runner = Isolated("tinygrad", 120)
  runner.profile = "portable"
  try: f = check_example(d, runner, None, True)
  finally: runner.stop()
  if f is None or f.prop not in ("values", "run"): return None
  f.triage = triage(f, out)
  return f
