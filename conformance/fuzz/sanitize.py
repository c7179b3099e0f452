"""`tinyspec fuzz --sanitize --backend c`: hostile graphs through C kernels built with
sanitizers, against the reference evaluator.

Examples come from conformance/fuzz/hostile.py (edge-dense inputs, narrow integer dtypes,
data-dependent gathers and scatters, gated accesses, symbolic sizes at and beyond their
bounds, parallel axis types, random OptOps). Each runs in a child Python process whose
kernels are built with AddressSanitizer and UndefinedBehaviorSanitizer (without
-fwrapv, every report fatal; GCC's runtime preloaded, as tests/compiler/test_compiler_asan.py
does), the OptOps kept where legal, every threaded axis run one iteration at a time in
reverse order (TINYSPEC_SLICE_ORDER: an axis run in parallel must be independent, so the
order cannot matter); a program with threads runs again in a ThreadSanitizer child on
real threads. A sanitizer report, a crash or hang of the child, an internal error, an
output that differs from the reference's (per node, within the op's tolerance, for
`drawn` graphs), or a refusal that is not the reference's own (PARAM.bounds for a size
out of its bounds) is a failure; Hypothesis shrinks it to a minimal example, written
under --out as a corpus case (negative when the reference refuses) that
`tinyspec conformance --backend c --cases DIR` replays. A refusal of the compiler's own
(compile.*, opt.*) is a documented limitation, counted.

The child: `python -m tinyspec.conformance.fuzz.sanitize --serve` (JSON lines as in
conformance/run/protocol.py, plus the OptOps, the thread count, the slice order and the
file its stderr goes to during the run).
"""
from __future__ import annotations
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
import traceback
import hashlib
import numpy as np
from tinyspec.conformance.fuzz.checks import Failure, check_values, reference_trace, views_of
from tinyspec.graph import load_file
from tinyspec.conformance.corpus.cases import from_disk, write_case
from tinyspec.conformance.run.protocol import write_outputs, BackendProcess, BackendDied, read_outputs, run_message, write_inputs
from tinyspec.conformance.fuzz.graphs import Drawn
from tinyspec.conformance.cluster import Unit, split, worker_name
from tinyspec.conformance.fuzz import hostile
from tinyspec.conformance.fuzz.units import run_units, database_key
from tinyspec.conformance.findings import example_database, case_text
from tinyspec.dtypes import DTYPES
from tinyspec.conformance.fuzz.search import search
from tinyspec.conformance.corpus.casegen import Draft, write_draft, input_names
from tinyspec.validate import validate
from tinyspec.conformance.fuzz.hostile import Example
from tinyspec.compiler.check import compare_outputs
from tinyspec.compiler.errors import REFUSED
from tinyspec.compiler.passes.optimize import optimize
from tinyspec.compiler.pipeline import lower
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.conformance.fuzz.driver import FuzzReport

ASAN_CFLAGS = "-O1 -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer -fno-wrapv"
TSAN_CFLAGS = "-O1 -fsanitize=thread -fno-omit-frame-pointer"
CI_EXAMPLES, CI_SEED = 400, 0      # the CI slice (scripts/test.sh): every planted bug of tests/conformance/test_fuzz_sanitize.py is found within it
REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: LeakSanitizer|SUMMARY: \w+Sanitizer")
TSAN_THREADS = 4


def runtime_library(name: str) -> str | None:
  """The path of GCC's sanitizer runtime lib{name}.so for the C compiler the runtime
  uses ($CC, else cc), or None."""
  cc = shutil.which(os.environ.get("CC") or "cc")
  if cc is None: return None
  try: r = subprocess.run([cc, f"-print-file-name=lib{name}.so"], capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.SubprocessError): return None
  path = r.stdout.strip()
  return path if r.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


def unavailable() -> str | None:
  """Why sanitized C kernels cannot run here, or None."""
  if runtime_library("asan") is None: return "no AddressSanitizer runtime (libasan.so) for the C compiler: --sanitize needs GCC's"
  return None


def child_env(kind: str, cache: Path, extra: dict | None = None) -> dict:
  """The environment of a sanitized child: its runtime preloaded, the kernels' flags,
  a cache of its own (sanitized builds never mix with plain ones)."""
  env = dict(os.environ)
  lib = runtime_library("asan" if kind == "asan" else "tsan")
  env.update(LD_PRELOAD=lib or "", TINYSPEC_CACHE=str(cache / kind),
             TINYSPEC_CFLAGS=ASAN_CFLAGS if kind == "asan" else TSAN_CFLAGS,
             # (a small quarantine and short allocation stacks: the child's Python allocates all the time, and ASan's
             # defaults, 256 MB of freed memory held back and 30 frames per malloc, made a third of the slice's time)
             ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1:redzone=2048:"
                          "quarantine_size_mb=16:thread_local_quarantine_size_kb=64:malloc_context_size=4",
             UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1", TSAN_OPTIONS="halt_on_error=1:report_signal_unsafe=0")
  env.update(extra or {})
  return env


# ------------------------------------------------------------------ the child
def _legal_prefix(opts: list):
  """A search hook for compiler.pipeline.lower: each kernel gets the longest prefix of
  `opts` that it accepts (None: the default heuristics)."""
  def search(sink, target, dev):
    for k in range(len(opts), 0, -1):
      try:
        optimize(sink, target, opts[:k], dev)
        return opts[:k]
      except REFUSED:
        continue
    return None
  return search


def handle(msg: dict) -> dict:
  """Compile and run one example with stderr (where sanitizers report) in msg["stderr"]."""
  g, _ = load_file(msg["graph"])
  dts = msg.get("dtypes", {})
  inputs = {k: from_disk(np.load(p, allow_pickle=False), dts[k]) if k in dts else np.load(p, allow_pickle=False) for k, p in msg.get("inputs", {}).items()}
  os.environ["TINYSPEC_SLICE_ORDER"] = msg.get("slice_order") or ""
  sys.stderr.flush()
  saved = os.dup(2)
  with open(msg["stderr"], "wb") as err:
    os.dup2(err.fileno(), 2)
  try:
    c = lower(g, "c", None, keep_stages=False, search=_legal_prefix(msg.get("opts") or []) if msg.get("opts") else None)
    outs = c.run(inputs, threads=msg.get("threads"))
    return {"ok": True, "outputs": write_outputs(outs, Path(msg["out_dir"])), "threaded": any(ks.thread is not None for ks in c.sources)}
  except Exception as e:
    rule = getattr(e, "rule", None)
    if isinstance(rule, str): return {"ok": False, "rule": rule, "error": f"{type(e).__name__}: {e}"[:1000]}
    return {"ok": False, "error": traceback.format_exc()[-3000:]}
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2); os.close(saved)


def serve() -> int:
  proto = os.fdopen(os.dup(sys.stdout.fileno()), "w")
  os.dup2(sys.stderr.fileno(), sys.stdout.fileno())   # kernels' and Python's prints go to stderr
  sys.stdout = sys.stderr
  for line in sys.stdin:
    if not line.strip(): continue
    msg = json.loads(line)
    if msg.get("cmd") == "quit": break
    ans = {"ok": True, "protocol": 1} if msg.get("cmd") == "hello" else handle(msg)
    proto.write(json.dumps(ans) + "\n"); proto.flush()
  return 0


# ------------------------------------------------------------------ the parent's side
@dataclass
class Answer:
  status: str                  # ok, refused, error, crash, timeout
  outputs: dict = field(default_factory=dict)
  rule: str | None = None
  message: str = ""
  report: str = ""             # what a sanitizer printed
  threaded: bool = False


class Child:
  """One sanitized child process (kind asan or tsan), restarted after a crash and every
  RESTART runs (each example loads a library of its own, which stays loaded)."""
  RESTART = 200

  def __init__(self, kind: str, work: Path, extra_env: dict | None, timeout: float):
    self.kind, self.work, self.timeout = kind, work, timeout
    self.proc = BackendProcess([sys.executable, "-m", "tinyspec.conformance.fuzz.sanitize", "--serve"], child_env(kind, work / "cache", extra_env))
    self.n = 0

  def run(self, graph_file: Path, inputs: dict, opts, threads=None, slice_order="") -> Answer:
    """inputs: name -> (.npy path, dtype) (protocol.write_inputs)."""
    self.n += 1
    out_dir = self.work / f"{self.kind}-out"
    out_dir.mkdir(exist_ok=True)
    err = self.work / f"{self.kind}.stderr"
    msg = run_message(f"{self.kind}{self.n}", graph_file, inputs, out_dir, opts=opts, threads=threads, slice_order=slice_order,
                      stderr=str(err))
    try:
      if self.n % self.RESTART == 0: self.proc.stop()
      if not self.proc.alive(): self.proc.start()
      ans = self.proc.request(msg, self.timeout)
    except BackendDied as e:
      return Answer("timeout" if e.kind == "timeout" else "crash", message=str(e), report=_report(err))
    report = _report(err)
    if ans.get("ok"):
      return Answer("ok", read_outputs(ans, out_dir), report=report, threaded=bool(ans.get("threaded")))
    return Answer("refused" if ans.get("rule") else "error", rule=ans.get("rule"), message=str(ans.get("error", "")), report=report)

  def stop(self): self.proc.stop()


def _headline(report: str) -> str:
  """The kind of a sanitizer report without paths and addresses (what makes two reports
  the same finding)."""
  m = re.search(r"runtime error: (.*)|(AddressSanitizer: [\w-]+)|(ThreadSanitizer: [\w ]+)", report)
  text = next((g for g in m.groups() if g), "") if m else report.splitlines()[0]
  return re.sub(r"0x[0-9a-f]+|/\S+", "_", text)[:200]


def _report(path: Path) -> str:
  try: text = path.read_text(errors="replace")
  except OSError: return ""
  m = REPORT.search(text)
  return text[max(0, m.start() - 200):][:4000] if m else ""


class SanitizedC:
  """Runs examples in the ASan+UBSan child (threaded axes in reverse order) and, when the
  program has threads, again in the TSan child on real threads."""
  name = "c (sanitized)"

  def __init__(self, extra_env: dict | None = None, timeout: float = 120.0):
    self.work = Path(tempfile.mkdtemp(prefix="tinyspec-sanitize-"))
    self.asan = Child("asan", self.work, extra_env, timeout)
    self.tsan = Child("tsan", self.work, extra_env, timeout) if runtime_library("tsan") else None

  def run(self, ex) -> Answer:
    d = self.work / "example"
    d.mkdir(exist_ok=True)
    gf = d / "graph.json"
    gf.write_text(ex.graph.dumps())
    ins = write_inputs(ex.inputs, d)
    a = self.asan.run(gf, ins, ex.opts, threads=1, slice_order="reversed")
    if a.status == "ok" and a.threaded and not a.report and self.tsan is not None:
      t = self.tsan.run(gf, ins, ex.opts, threads=TSAN_THREADS)
      if t.report or t.status in ("crash", "timeout"):
        return Answer(t.status if t.status != "ok" else "ok", t.outputs, t.rule, "ThreadSanitizer: " + t.message, t.report, True)
    return a

  def stop(self):
    self.asan.stop()
    if self.tsan is not None: self.tsan.stop()
    shutil.rmtree(self.work, ignore_errors=True)


# ------------------------------------------------------------------ judging one example
def reference(ex):
  """("ok", outputs) or ("refused", rule) of the reference evaluator, or ("error", msg)."""
  try: return "ok", evaluate(ex.graph, ex.inputs)
  except EvalError as e: return ("refused", e.rule) if e.rule else ("error", str(e))
  except Exception as e: return "error", f"{type(e).__name__}: {e}"


def check_example(ex, runner, refused: dict) -> "Failure | None":
  """The first failure of example ex on the sanitized runner, or None (see the module
  doc); refusals of the compiler's own are counted in `refused`."""
  d = ex.drawn or Drawn(ex.graph, dict(ex.inputs), "kernel" if ex.graph.level == "kernel" else "tensor")
  def fail(prop, msg):   # the first line says what failed (a finding's signature), the next ones where
    first, _, rest = msg.partition("\n")
    return Failure(prop, None, None, None, f"{first}\n{ex.describe()}\n{rest}"[:3000], d)
  want = reference(ex)
  if want[0] == "error": return None               # the reference's own trouble: tests/refimpl/test_refimpl_* hunt it
  got = runner.run(ex)
  if got.report: return fail("sanitizer", f"{_headline(got.report)}\n{got.report}")
  if got.status in ("crash", "timeout", "error"): return fail(got.status, got.message)
  if want[0] == "refused":
    if got.status == "refused" and got.rule == want[1]: return None
    return fail("refusal", f"the reference refuses with {want[1]}; the compiled program " + (f"refuses with {got.rule}" if got.status == "refused" else "runs"))
  if got.status == "refused":
    if got.rule.split(".")[0] in ("compile", "opt"):
      refused[got.rule] = refused.get(got.rule, 0) + 1
      refused.setdefault("why", {}).setdefault(got.rule, got.message.splitlines()[-1][:300] if got.message else "")
      return None
    return fail("refusal", f"refused with {got.rule} an input the reference accepts: {got.message}")
  if ex.drawn is not None:
    views = views_of(ex.graph)
    outs = {k: from_disk(v, views[ex.drawn.outputs[k]].dtype) if k in ex.drawn.outputs else v for k, v in got.outputs.items()}
    trace, _ = reference_trace(ex.drawn)
    f = check_values(ex.drawn, outs, True, views, trace)
    if f is not None: f.message = f"{ex.describe()}: {f.message}"
    return f
  bad = compare_outputs(got.outputs, want[1])
  return fail("values", "; ".join(bad)) if bad else None


# ------------------------------------------------------------------ the search
def shares(examples: int, families) -> dict:
  """Examples per family: an even split (the first ones take the remainder). Each family
  is its own search, seeded by its place in hostile.FAMILIES: the examples a family draws
  in a run of all families are the ones a run of that family alone with its share draws."""
  per, extra = divmod(examples, len(families))
  return {f: per + (k < extra) for k, f in enumerate(families)}


UNIT_EXAMPLES = 100   # examples per unit at most: each family's share of the CI slice (44 or 45) stays one unit (its draws unchanged); units of ~50 s keep the overhead < 5% at 100 workers (bench/bench_cluster.py)
SANITIZE_TAG = "c.sanitize"   # the resource of a worker whose C compiler has the sanitizer runtimes


def plan(examples: int, seed: int, families) -> list:
  """The units of a run (conformance/cluster.py Unit): each family's share (`shares`) cut
  into units of at most UNIT_EXAMPLES, the first seeded by the family's place in
  hostile.FAMILIES, the next ones 7919 further each. What a unit draws depends on its
  family, seed and share alone."""
  units = []
  for fam, n in shares(examples, families).items():
    base = seed + 1009 * (hostile.FAMILIES.index(fam) if fam in hostile.FAMILIES else 0)
    for k, part in enumerate(split(n, UNIT_EXAMPLES)):
      units.append(Unit("sanitize", fam, base + 7919 * k, part, len(units), SANITIZE_TAG))
  return units


def fuzz_sanitized(examples: int = 100, seed: int = 0, out: Path | None = None, families=None, log=None,
                   timeout: float = 120.0, extra_env: dict | None = None, stop_at_first: bool = False, shrink: bool = True,
                   jobs: int = 1, scheduler: str | None = None, db: Path | None = None, progress: bool | None = None):
  """Run `examples` hostile examples (conformance/fuzz/hostile.py families, each its share:
  `shares`, in units: `plan`) through the sanitized C backend, on the Dask scheduler at
  `scheduler` or an embedded cluster of `jobs` processes (conformance/cluster.py). Each
  failure is shrunk (unless not `shrink`) and (with `out`) written as a case; each unit's
  search goes on after a failure, skipping failures of the same kind, until its examples
  are spent (or the first, with stop_at_first: then the units not started are dropped).
  `extra_env`: more environment for the children. `db`: the findings database (a run
  that stopped continues with its units not yet finished). Returns a driver.FuzzReport
  merged in the units' order (a kind of failure two units find is reported once); its
  `drawn` counts the examples drawn (shrinking aside) per family, `lost` the
  cluster.ClusterLost that ended it early (None), `missing` what no worker had."""
  t0 = time.monotonic()
  fams = tuple(dict.fromkeys(families or hostile.FAMILIES))
  units = plan(examples, seed, fams)
  hunt = f"sanitize examples={examples} seed={seed} families={','.join(fams)} shrink={shrink} env={sorted((extra_env or {}).items())}"
  stop = (lambda results: any(r["findings"] for r in results.values())) if stop_at_first else None
  ran = run_units(units, run_unit, (timeout, extra_env, shrink, stop_at_first), hunt, db, scheduler, jobs, probe=_probe,
                  progress=progress, stop=stop, label="fuzz --sanitize", cleanup=stop_runners)
  rep = _merge(units, ran, out, log, stop_at_first)
  rep.seconds = time.monotonic() - t0
  return rep


def _probe() -> list:
  """What a worker has for this search: the sanitizer runtimes (SANITIZE_TAG) or nothing."""
  return [SANITIZE_TAG] if unavailable() is None else []


_RUNNERS: dict = {}   # (timeout, environment) -> the SanitizedC of this worker process, kept between units


def _runner(timeout: float, extra_env: dict | None) -> "SanitizedC":
  key = (timeout, tuple(sorted((extra_env or {}).items())))
  if key not in _RUNNERS: _RUNNERS[key] = SanitizedC(extra_env, timeout)
  return _RUNNERS[key]


def stop_runners() -> None:
  """The children of this worker process's runners stopped (at the end of a run)."""
  while _RUNNERS: _RUNNERS.popitem()[1].stop()


def run_unit(unit, examples: dict, timeout: float, extra_env, shrink: bool, stop_at_first: bool) -> dict:
  """One unit on a worker: its family's search with its seed and share. The result's
  `live` failures travel home (for the cases written there); the rest is JSON."""
  t0 = time.monotonic()
  runner = _runner(timeout, extra_env)
  rep = FuzzReport(runner.name)
  rep.drawn = {}
  db = example_database(examples.get(database_key(unit), []))
  _hunt(rep, runner, hostile.examples((unit.name,)), unit.share, unit.seed, set(), None, None, stop_at_first, shrink,
        db, database_key(unit))
  why = rep.refused.pop("why", {})
  return {"examples": rep.examples, "drawn": rep.drawn, "refused": rep.refused, "why": why, "worker": worker_name(),
          "seconds": time.monotonic() - t0, "saved": db.saved, "findings": [_finding(f) for f in rep.failures],
          "live": rep.failures}


def _finding(f) -> dict:
  """A sanitizer failure as the findings database keeps it (its signature: property, op,
  dtype or the report's kind; its repro: the minimal case)."""
  m = f.case()
  return {"signature": json.dumps(["sanitize", *f.signature]), "op": f.op, "dtype_class": DTYPES[f.dtype].cls if f.dtype in DTYPES else None,
          "device": "c (sanitized)", "kind": f.prop, "text": str(f)[:3000], "repro": case_text(m.graph.dumps(), m.inputs)}


class _Stored:
  """A failure of a unit finished in an earlier run (the findings database's record of it)."""
  def __init__(self, d: dict): self.signature, self.text = tuple(json.loads(d["signature"])[1:]), d["text"]
  def __str__(self): return self.text


def _merge(units, ran, out, log, stop_at_first: bool):
  """The units' results in their order as one FuzzReport; the cases of this run's
  failures written under out."""
  rep = FuzzReport(SanitizedC.name)
  rep.drawn, rep.lost, rep.missing, rep.resumed, rep.dashboard = {}, ran.lost, ran.missing, ran.resumed, ran.dashboard
  seen: set = set()
  for u in units:
    r = ran.results.get(u.key)
    if r is None: continue
    rep.examples += r["examples"]
    for k, v in r["drawn"].items(): rep.drawn[k] = rep.drawn.get(k, 0) + v
    for k, v in r["refused"].items(): rep.refused[k] = rep.refused.get(k, 0) + v
    for k, v in r["why"].items(): rep.refused.setdefault("why", {}).setdefault(k, v)
    for f in r.get("live") or [_Stored(d) for d in r["findings"]]:
      if f.signature in seen: continue
      seen.add(f.signature)
      rep.failures.append(f)
      if log: log(f"FAIL {f}")
      if out is not None and not isinstance(f, _Stored): rep.written.append(write_example(f, Path(out)))
    if stop_at_first and rep.failures: break
  return rep


def _hunt(rep, runner, strat, budget: int, seed: int, seen: set, out, log, stop_at_first: bool, shrink: bool,
          database=None, database_key: bytes | None = None) -> None:
  """Draw `budget` examples of strat (a search per failure found, each shrunk), adding the
  failures of kinds not `seen` to rep."""
  def check(ex, found):
    if found is None: rep.drawn[ex.family] = rep.drawn.get(ex.family, 0) + 1
    return check_example(ex, runner, rep.refused)
  round_ = 0
  while budget > 0:
    count, f = search(strat, budget, seed + round_, check, seen, shrink=shrink, log=log, database=database, database_key=database_key)
    rep.examples += count
    budget -= count
    round_ += 1
    if f is None: return
    seen.add(f.signature)
    rep.failures.append(f)
    if log: log(f"FAIL {f}")
    if out is not None: rep.written.append(write_example(f, Path(out)))
    if stop_at_first: return


def write_example(f, out: Path) -> Path:
  """The minimal failing example as a corpus case under out/sanitize/<kind>-<hash>/: a
  positive case with the reference's outputs, or a negative one with its refusal."""
  m = f.case()
  h = hashlib.sha256(m.graph.dumps().encode()).hexdigest()[:10]
  cid = f"sanitize/{f.prop}-{h}"
  desc = f"found by tinyspec fuzz --sanitize: {f}"[:500]
  want = reference(m_example(m))
  if want[0] == "refused":
    res = validate(m.graph)
    names = input_names(m.graph, res.views)
    inputs = {k: (np.asarray(v), res.views[names[k]].dtype) for k, v in m.inputs.items() if k in names}
    meta = {"id": cid, "kind": "negative", "description": desc, "level": res.level, "ops": sorted({n.op for n in m.graph.nodes}),
            "expect": {"rule": want[1], "node": None, "exit": 2, "only": True}}
    write_case(out / cid, meta, m.graph.dumps(), inputs, {})
  else:
    write_draft(Draft(cid, m.graph, dict(m.inputs), [], desc), out)
  return out / cid


def m_example(d):
  """A Drawn as an Example (for the reference run)."""
  return Example("case", d.graph, dict(d.inputs))


if __name__ == "__main__":
  if sys.argv[1:] == ["--serve"]: sys.exit(serve())
  print("usage: python -m tinyspec.conformance.fuzz.sanitize --serve  (the child of tinyspec fuzz --sanitize)", file=sys.stderr)
  sys.exit(2)
