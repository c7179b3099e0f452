"""One captured realize (interop.capture.Realization) -> its schedule record.

Each graph of the schedule (the tensor graph of the realized tensors, the SINK of each
scheduled kernel, each kernel's lowered program) is built and judged by interop.script's
own machinery (its graph builders and GraphResult.check: validate, evaluate with the
reference evaluator, compare with tinygrad's values within the portable bounds), under a
time limit per graph. A graph's verdict is the first stage it fails:

  import   the importer raised, or left a tinygrad op/dtype/arg unmapped
  valid    the validator's first diagnostic, "[rule] op: message"
  agree    the reference's values differ from tinygrad's, the evaluator refused or crashed,
           or tinygrad's value could not be read (unchecked)
  time     import and check ran past the limit (tinyspec.deadline.TimeLimit)
  ok       imported, valid and equal within the portable bounds

A graph that disagrees is diagnosed (diagnose.py): the documented tinygrad behaviours
that, redone on the graph, give tinygrad's values are recorded with its verdict, and so
is what the schedule's graphs show together (add_evidence). A failing graph's verdict
lists the ops it holds.
"""
from __future__ import annotations
import time
import traceback
from collections import Counter
from tinyspec.interop import script
from tinyspec.deadline import TimeLimit, time_limit
from tinyspec.interop.suite.diagnose import diagnose

LEVELS = ("tensor", "kernel", "program")
STAGES = ("import", "valid", "agree", "time")   # the failing stages, in the order a graph meets them
EVIDENCE = ("program-agrees", "program-reassociated")   # what a schedule's graphs show together (add_evidence), beside diagnose.py's diagnoses


def schedule_record(test: str, r, levels=LEVELS, limit: float | None = 60.0, failing: list | None = None) -> dict:
  """The JSON record of realize r of test `test`: its schedule's CALL kinds and a verdict
  for each of its graphs at the given levels. failing: a list that gets the GraphResult
  of each graph that imported but failed later (to be written out)."""
  t0 = time.perf_counter()
  graphs = []
  for name, level, build in _graphs(r, levels):
    verdict, g = _verdict(name, level, build, limit)
    graphs.append(verdict)
    if g is not None and verdict["stage"] != "ok":
      verdict["ops"] = sorted({n.op for n in g.graph.nodes})
      if failing is not None: failing.append(g)
  rec = {"test": test, "schedule": r.index, "calls": dict(Counter(c.kind for c in r.calls)),
         "graphs": graphs, "seconds": round(time.perf_counter() - t0, 3)}
  add_evidence(rec)
  return rec


def add_evidence(rec: dict) -> None:
  """program-agrees: a kernel that disagrees with tinygrad while its lowered program (what
  ran) agrees, or a tensor graph that disagrees while every lowered program of its schedule
  agrees: the difference comes from tinygrad's lowering (its decompositions and rewrites),
  not from the capture or the run. program-reassociated: the same, where some of those
  programs agree only as C reads their rendered text (diagnosis c-association confirmed):
  the difference is the C-style renderer's dropped parentheses."""
  verdicts = {g["name"]: g for g in rec["graphs"]}
  programs = [g for g in rec["graphs"] if g["level"] == "program"]
  agrees = lambda p: p is not None and p["stage"] == "ok"
  reassociated = lambda p: p is not None and "c-association" in p.get("diagnoses", ())
  for g in rec["graphs"]:
    if g["stage"] != "agree" or not g["error"].startswith("mismatch") or "program-agrees" in g.get("diagnoses", ()): continue
    if g["level"] == "kernel": ran = [verdicts.get(g["name"].removesuffix(".kernel") + ".program")]
    elif g["level"] == "tensor": ran = programs
    else: continue
    if not ran or not all(agrees(p) or reassociated(p) for p in ran): continue
    shown = "program-agrees" if all(agrees(p) for p in ran) else "program-reassociated"
    g["diagnoses"] = [*g.get("diagnoses", ()), shown]


def _graphs(r, levels):
  """(name, level, build) for each graph of realize r; build() -> a GraphResult (raises
  where the import fails)."""
  if "tensor" in levels: yield f"r{r.index}.tensor", "tensor", lambda: script._tensor_graph(r)
  for c in r.calls:
    if c.kind != "SINK": continue
    kernel = _Once(lambda c=c: script._kernel_graph(r, c))
    if "kernel" in levels: yield f"r{r.index}.k{c.index}.kernel", "kernel", kernel
    if "program" in levels: yield f"r{r.index}.k{c.index}.program", "program", lambda c=c, k=kernel: _program_graph(r, c, k())


class _Once:
  """A builder called at most once (a kernel's graph is also where its program's inputs come from)."""
  def __init__(self, build): self.build, self.done = build, None
  def __call__(self):
    if self.done is None: self.done = self.build()
    return self.done


def _program_graph(r, c, k):
  """The lowered program of call c as import_script builds it."""
  p = c.program()
  if p is None: raise LookupError(f"call {c.index} has no lowered program (device {c.device})")
  return script.program_graph(r, c, k, p)


def _verdict(name: str, level: str, build, limit: float | None) -> tuple[dict, object]:
  """(the graph's verdict, its GraphResult or None where the import failed)."""
  t0, built = time.perf_counter(), []
  shown, present = [], []
  try:
    with time_limit(limit):
      stage, error = _judge(build, built)
      if stage == "agree" and error.startswith("mismatch"): shown, present = _diagnose(built[0])
  except TimeLimit:
    stage, error = "time", f"import and check over {limit:g} s"
  verdict = {"name": name, "level": level, "stage": stage, "error": error, "seconds": round(time.perf_counter() - t0, 3)}
  if shown: verdict["diagnoses"] = shown
  if present: verdict["patterns"] = present
  return verdict, (built[0] if built else None)


def _diagnose(g) -> tuple[list[str], list[str]]:
  try: return diagnose(g)
  except Exception as e:   # noqa: BLE001 (a diagnosis that cannot run shows nothing; the failure stays as it is)
    return [f"not run: {_exception(e)}"], []


def _judge(build, built: list) -> tuple[str, str]:
  try:
    g = build()
  except Exception as e:   # noqa: BLE001 (an import that raises is a finding, recorded)
    return "import", _exception(e)
  built.append(g)
  if g.report.unmapped:
    return "import", "unmapped: " + ", ".join(sorted(g.report.unmapped))
  try:
    g.check()
  except Exception as e:   # noqa: BLE001 (a crash of the validator or evaluator is a finding, recorded)
    return "valid", "check crashed: " + _exception(e)
  if g.diagnostics:
    d = g.diagnostics[0]
    return "valid", f"[{d.rule}] {d.op}: {d.message}"[:400]
  if g.eval_ok: return "ok", ""
  if g.limitation: return "agree", g.evaluation[:400]
  if not g.expected and not g.unread: return "agree", "nothing to compare: no value of tinygrad's was read"
  return "agree", g.evaluation[:400]


def _exception(e: BaseException) -> str:
  where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
  at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
  first = str(e).splitlines()[0] if str(e) else ""
  return f"{type(e).__name__}: {first}"[:300] + at
