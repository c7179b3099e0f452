"""The properties a backend is held to on drawn graphs (conformance/fuzz/graphs.py), and
`fuzz()`, which runs them under Hypothesis and keeps each minimal failing case.

For a drawn graph (every op node an output):
  valid      the validator accepts the whole graph (it was built node by node);
  min_max    every value the reference evaluator computes lies in its node's derived
             min_max (NaN aside): spec/derived.yaml `soundness`;
  values     the backend's value of every node equals the reference evaluator's value
             of that node's op applied to the backend's own values of its sources:
             integers and bools bit-exact, floats within the op's tolerance
             (conformance/run/compare.py, ops.yaml `tolerances`). Checking each node against
             its own inputs keeps tolerances from compounding along a chain and names
             the first node whose value differs;
  stages     (backends with stages(), i.e. the compiler) every stage's graph is valid
             and the reference evaluator's outputs of it pass the same check;
  mutant     the graph broken by one mutation of strategies.yaml is rejected by the
             validator with the mutation's rule id at the mutated node.
A failure names its property, the node and the op; `Failure.case` is the minimal graph
(the failing node and what it reads). A backend with a `triage(failure, out)` method sorts
each failure: a documented bug of its target or a limit of its adapter is counted apart
(FuzzReport.known, .unsupported), not as a failure (the tinygrad backend's: interop/hunt.py).
"""
from __future__ import annotations
import tempfile
import time
import warnings
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph, Node
from tinyspec.frozen import thaw
from tinyspec.files import load_npy
from tinyspec.conformance.run.protocol import answer_outputs as _answer_outputs
from tinyspec.conformance.run.compare import describe, element_bounds
from tinyspec.conformance.fuzz.graphs import Drawn
from tinyspec.conformance.fuzz.localcheck import local_reference


@dataclass
class Failure:
  prop: str              # valid, min_max, values, run, stage <name>
  node: int | None
  op: str | None
  dtype: str | None
  message: str
  drawn: Drawn
  detail: dict | None = field(default=None, repr=False, compare=False)   # values: got, want, bounds, alternatives, operands
  triage: object = field(default=None, repr=False, compare=False)        # the backend's verdict on it (backend.triage)

  @property
  def signature(self) -> tuple:
    """What makes two failures the same finding: property, op and dtype (for a failure of
    the whole graph, the kind of error, its numbers left out)."""
    if self.node is None:
      import re
      return (self.prop, re.sub(r"\d+", "#", self.message.split("\n")[0])[:80])
    return (self.prop, self.op, self.dtype)

  def case(self) -> Drawn:
    return self.drawn.minimal(self.node) if self.node is not None else self.drawn

  def __str__(self):
    where = f"node {self.node} ({self.op}, {self.dtype})" if self.node is not None else "the graph"
    return f"{self.prop}: {where}: {self.message}"


class Refused(Exception):
  """The backend refused a valid graph with a rule id (a documented limitation, such as
  the compiler's compile.form): no finding, but counted."""
  def __init__(self, rule: str, message: str):
    super().__init__(message)
    self.rule = rule


class PropertyFailed(AssertionError):
  def __init__(self, f: Failure):
    super().__init__(str(f))
    self.failure = f


# ------------------------------------------------------------------ the value check
def _views(g: Graph):
  from tinyspec.validate import validate
  return validate(g).views


def known_values(d: Drawn, outputs: dict) -> dict:
  """node -> value: the leaves' (from the inputs) and the outputs' (from `outputs`)."""
  known = dict(d.values)
  for name, i in d.outputs.items():
    if name in outputs: known[i] = np.asarray(outputs[name])
  return known


def _same_as_trace(got, ref) -> bool:
  """Whether a value is bit for bit the reference's own (NaNs alike): then it needs no
  check against its sources (the common case, and the cheap one)."""
  if ref is None: return False
  ref = np.asarray(ref)
  try: ref = np.broadcast_to(ref, got.shape) if ref.shape != got.shape else ref
  except ValueError: return False
  if ref.dtype != got.dtype: return False
  if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
    a, b = got.astype(np.float64), ref.astype(np.float64)
    from tinyspec.conformance.run.compare import _bits
    return bool(np.all((_bits(got) == _bits(ref)) | (np.isnan(a) & np.isnan(b))))
  return bool(np.array_equal(got, ref))


def check_values(d: Drawn, outputs: dict, decomposed: bool, views=None, trace: dict | None = None, profile: str = "strict") -> Failure | None:
  """The first output node (in graph order) whose value is not the reference's value of
  its op on the values of its sources (in the portable profile: nor any result the
  decisions allow, tinyspec.portable). `trace`: the reference's own values of the nodes
  (refimpl trace=True); a value equal to it passes at once."""
  views = views or _views(d.graph)
  known = known_values(d, outputs)
  missing = sorted(set(d.outputs) - set(outputs))
  if missing: return Failure("values", None, None, None, f"outputs missing: {', '.join(missing)}", d)
  for i in sorted(d.outputs.values()):
    n, dt = d.graph.nodes[i], views[i].dtype
    got = np.asarray(known[i])
    if trace is not None and _same_as_trace(got, trace.get(i)): continue
    try: want, operands = local_reference(d, views, i, known)
    except Exception as e:   # the reference refuses the backend's values: report it, it is a finding
      return Failure("values", i, n.op, dt, f"the reference evaluator cannot check this node: {type(e).__name__}: {e}"[:500], d)
    from tinyspec.refimpl.numeric import NP
    if got.dtype != NP[dt]: return Failure("values", i, n.op, dt, f"dtype {got.dtype}, expected {dt}", d)
    if d.level == "kernel" and np.shape(want) == () and got.ndim == 1:
      want = np.broadcast_to(want, got.shape)   # a value the loop does not change, stored at every element
    bounds, alts = element_bounds(n.op, n.arg, dt, operands, want, decomposed, profile), []
    if profile == "portable":
      from tinyspec import portable as P
      try: xs = list(np.broadcast_arrays(*operands, np.asarray(want)))[:-1] if operands else []
      except ValueError: xs = operands
      bounds, alts, names = P.alternatives(n.op, n.arg, dt, xs, want, bounds, tuple((n.arg or {}).get("axes") or ()) if isinstance(n.arg, dict) else ())
      for v in names:
        try: alts.append(np.broadcast_to(local_reference(d, views, i, known, (v,))[0], np.shape(want)))
        except Exception: pass
    msg = describe(got, want, dt, bounds, alternatives=alts)
    if msg: return Failure("values", i, n.op, dt, msg, d, {"got": got, "want": want, "bounds": bounds, "alternatives": alts, "operands": operands,
                                                        "sources": {j: known[j] for j in n.src if j in known}})
  return None


def reference_trace(d: Drawn):
  """(the reference evaluator's values of every node, None) or (None, a Failure)."""
  from tinyspec.refimpl import evaluate
  try: return evaluate(d.graph, d.inputs, trace=True).values, None
  except Exception as e:   # the reference itself fails on a valid graph: a finding too
    return None, Failure("reference", None, None, None, f"the reference evaluator fails: {type(e).__name__}: {e}"[:800], d)


def check_min_max(d: Drawn, views=None, trace: dict | None = None) -> Failure | None:
  views = views or _views(d.graph)
  if trace is None:
    trace, f = reference_trace(d)
    if f: return f
  for i in sorted(trace):
    v, view = trace[i], views[i]
    if view is None or view.min_max is None or not isinstance(v, np.ndarray) or not isinstance(view.dtype, str): continue
    cls = DTYPES[view.dtype].cls
    x = v.astype(np.float64) if cls == "float" else v.astype(object) if cls in ("int", "uint", "index") else v.astype(np.int64)
    if cls == "float": x = x[~np.isnan(x)]
    if x.size == 0: continue
    lo, hi = view.min_max
    mn, mx = x.min(), x.max()
    if mn < lo or mx > hi:
      return Failure("min_max", i, d.graph.nodes[i].op, view.dtype, f"values in [{mn}, {mx}] outside the derived min_max [{lo}, {hi}]", d)
  return None


def check_valid(d: Drawn) -> Failure | None:
  from tinyspec.validate import validate
  res = validate(d.graph)
  if res.ok: return None
  x = res.diagnostics[0]
  return Failure("valid", x.node, x.op, None, f"the validator rejects a drawn graph: {x.format()}", d)


def check_stages(d: Drawn, backend, decomposed: bool, trace: dict | None = None) -> Failure | None:
  """Every stage graph of the backend is valid and computes what the reference allows."""
  from tinyspec.validate import validate
  from tinyspec.refimpl import evaluate, EvalError
  try: stages = backend.stages(d.graph)
  except Exception as e:
    if isinstance(getattr(e, "rule", None), str): return None   # refused with a rule id: counted by the run itself
    return Failure("stages", None, None, None, f"{type(e).__name__}: {e}"[:500], d)
  for name, g in stages.items():
    if name == "input": continue
    res = validate(g)
    if not res.ok: return Failure(f"stage {name}", None, None, None, "invalid stage graph: " + res.diagnostics[0].format(), d)
    from tinyspec.conformance.corpus.casegen import input_names
    names = input_names(g, res.views)   # a stage may drop a buffer nothing reads: its graph's own inputs
    try: outs = evaluate(g, {k: v for k, v in d.inputs.items() if k in names})
    except EvalError as e:
      if e.rule in ("eval.unsupported", "eval.oob") and name in ("linearize", "render"): continue   # refimpl's limit on LINEARs (compiler/check.py)
      return Failure(f"stage {name}", None, None, None, f"the reference evaluator refuses the stage graph: {e}"[:500], d)
    except Exception as e:
      return Failure(f"stage {name}", None, None, None, f"the reference evaluator fails on the stage graph: {type(e).__name__}: {e}"[:500], d)
    f = check_values(d, outs, decomposed, None, trace)
    if f is not None:
      f.prop = f"stage {name}"
      return f
  return None


def check_mutant(d: Drawn, m) -> Failure | None:
  """The validator rejects a mutant (strategies.Mutant) with its tagged rule at its node."""
  from tinyspec.validate import validate
  if m is None: return None
  got = [(x.rule, x.node) for x in validate(m.graph, tables=d.tables).diagnostics]
  if (m.rule, m.node) in got: return None
  return Failure("mutant", m.node, m.graph.nodes[m.node].op if m.node is not None and m.node < len(m.graph.nodes) else None, None,
                 f"mutation {m.how} should break {m.rule} at node {m.node}; the validator reports {got or 'nothing'}: {m.graph.dumps()}"[:2000], d)


def with_mutants(base, offset: int = 0):
  """Pairs (drawn graph, a mutant of it or None): the fuzz draws both. offset rotates
  the rule list (the zero choice takes its first: each round breaks another rule)."""
  from hypothesis import strategies as st
  from tinyspec.conformance.fuzz.graphs import mutation_rules, _apply, _DrawAdapter, _tables

  @st.composite
  def pairs(draw):
    d = draw(base)
    table = mutation_rules(d.tables)
    rules = sorted(table)
    rule = draw(st.sampled_from(rules[offset % len(rules):] + rules[:offset % len(rules)]))
    return d, _apply(_DrawAdapter(draw), d, rule, table[rule], _tables(d.tables))
  return pairs()


# ------------------------------------------------------------------ running a backend
class InProcess:
  """A backend object called directly (tests; a crash takes the caller down)."""
  def __init__(self, backend):
    from tinyspec.backends import get_backend
    from tinyspec.backends import capabilities_of
    self.backend = get_backend(backend)
    self.name = getattr(self.backend, "name", "?")
    self.caps = capabilities_of(self.backend)

  def run(self, d: Drawn) -> dict:
    try: return self.backend.run(d.graph, d.inputs)
    except Exception as e:
      rule = getattr(e, "rule", None)
      if isinstance(rule, str): raise Refused(rule, str(e)) from None
      raise

  def stop(self): pass


class Isolated:
  """A backend behind the protocol, in its own process: a crash or hang is a finding."""
  def __init__(self, spec: str, timeout: float = 60.0):
    from tinyspec.conformance.run.execute import CaseRunner
    self.runner = CaseRunner(spec, timeout=timeout)
    self.caps = self.runner.capabilities()
    self.name = self.runner.name
    self.proc = self.runner._procs[0]
    self.tmp = Path(tempfile.mkdtemp(prefix="tinyspec-fuzz-"))
    self.n = 0

  def run(self, d: Drawn) -> dict:
    from tinyspec.conformance.corpus.cases import save_array, dtype_of_array, from_disk
    from tinyspec.conformance.run.protocol import BackendDied
    self.n += 1
    w = self.tmp / f"e{self.n % 4}"
    w.mkdir(exist_ok=True)
    (w / "graph.json").write_text(d.graph.dumps())
    ins, dts = {}, {}
    for k, v in d.inputs.items():
      dt = "bfloat16" if v.dtype.name == "bfloat16" else dtype_of_array(v)
      save_array(w / f"in.{k}.npy", v, dt); ins[k] = str(w / f"in.{k}.npy"); dts[k] = dt
    msg = {"cmd": "run", "id": f"fuzz{self.n}", "graph": str(w / "graph.json"), "inputs": ins, "dtypes": dts, "out_dir": str(w)}
    try:
      if not self.proc.alive(): self.proc.start()
      ans = self.proc.request(msg, self.runner.timeout)
    except BackendDied as e:
      raise RuntimeError(f"backend {e.kind}: {e}") from None
    if not ans.get("ok"):
      if isinstance(ans.get("rule"), str): raise Refused(ans["rule"], str(ans.get("error")))
      raise RuntimeError(f"failed: {ans.get('error')}")
    views = _views(d.graph)
    out = {}
    for k, p in _answer_outputs(ans, w).items():
      a = load_npy(p)
      i = d.outputs.get(k)
      out[k] = from_disk(a, views[i].dtype) if i is not None and views[i].dtype == "bfloat16" else a
    return out

  def stop(self):
    import shutil
    self.proc.stop()
    shutil.rmtree(self.tmp, ignore_errors=True)


def check_example(d: Drawn, runner, stage_backend=None, decomposed: bool = False, refused: dict | None = None,
                  only: str | None = None) -> Failure | None:
  """The properties on one drawn graph: the first failure, or None. A refusal with a rule
  id is counted in `refused` (rule -> count) and is no failure. `only` ("values",
  "run" or "stages"): while shrinking a failure, check just its kind of property."""
  f = check_valid(d)
  if f: return f
  views = _views(d.graph)
  trace, f = reference_trace(d)
  if f: return f
  f = check_min_max(d, views, trace)
  if f: return f
  if only in (None, "values", "run"):
    f = _run_and_check(d, runner, decomposed, refused, views, trace)
    if f or only is not None: return f
  if stage_backend is not None: return check_stages(d, stage_backend, decomposed, trace)
  return None


def _run_and_check(d, runner, decomposed, refused, views, trace) -> Failure | None:
  try: outs = runner.run(d)
  except Refused as e:
    if refused is not None: refused[e.rule] = refused.get(e.rule, 0) + 1
    return None
  except Exception as e:
    return Failure("run", None, None, None, f"{type(e).__name__}: {e}"[:800], d)
  return check_values(d, outs, decomposed, views, trace, getattr(runner, "profile", "strict"))


# ------------------------------------------------------------------ fuzzing
@dataclass
class FuzzReport:
  backend: str
  profile: str = "strict"                         # the conformance profile the values were judged by
  examples: int = 0
  seconds: float = 0.0
  failures: list = field(default_factory=list)    # Failure, each minimal
  refused: dict = field(default_factory=dict)     # rule id -> valid graphs the backend refused with it
  written: list = field(default_factory=list)     # case folders written
  unwritten: list = field(default_factory=list)   # FileRefused: a failure that could not be written under out
  known: list = field(default_factory=list)       # failures the backend's triage matched to a documented bug (not failures)
  unsupported: dict = field(default_factory=dict) # what the backend's triage found beyond its adapter -> count (not failures)


EXPLORE_PER_ROUND = 4   # examples per focus after the first pass
SHRINK_CALLS = 150      # checks spent shrinking one failure at most (each may run the backend)


class NoDrawableOps(ValueError):
  """Nothing can be drawn for the backend at the levels asked for."""


def backend_ops(caps, level: str, ops=None) -> list[str]:
  """The ops drawn at `level` for a backend: drawable there, run by the backend and by
  the reference evaluator at that level."""
  from tinyspec.conformance.fuzz.graphs import drawable_ops
  from tinyspec.refimpl import supported_ops
  ref = supported_ops()
  return [op for op in drawable_ops(level, None, ops) if level in caps.ops.get(op, ()) and level in ref.get(op, ())]


def backend_strategy(caps, level: str, max_ops: int = 6, ops=None, focus=None, salt: int = 0):
  """graphs() restricted to what the backend and the reference evaluator both run;
  focus (a Focus): the last op drawn is its op, its first source of its dtypes."""
  from tinyspec.conformance.fuzz.graphs import graphs, value_dtypes
  dts = [x for x in value_dtypes() if x in caps.dtypes]
  if focus is None: return graphs(level, ops=backend_ops(caps, level, ops), max_ops=max_ops, dtypes=dts)
  return graphs(level, ops=backend_ops(caps, level, ops), max_ops=max_ops, dtypes=dts, final_op=focus.op,
                final_dtypes=focus.dtypes, salt=salt)


@dataclass(frozen=True)
class Focus:
  """What one round of the fuzz aims at: an op at a level, its first value source of
  one dtype class (bool, int, uint, float, index)."""
  level: str
  op: str
  dtypes: tuple


def foci(caps, levels, seed: int) -> list[Focus]:
  """Every (level, op, dtype class) the backend runs, in an order shuffled by the seed.
  Hypothesis draws mostly variations of what it drew before (200 examples of a graph
  strategy hold about 50 distinct first choices), so left alone it reaches a few of
  the ~90 ops x dtype classes; the fuzz gives each its own round instead."""
  import random
  from tinyspec.tables import tables
  from tinyspec.conformance.fuzz.graphs import value_dtypes
  T = tables()
  out = []
  rng = random.Random(seed)
  for level in levels:
    for op in backend_ops(caps, level):
      slot = next((sl for sl in T.ops[op].slots if sl.kind == "value"), None)
      allowed = (slot.allowed() if slot is not None else None) or set(value_dtypes())
      dts = [x for x in value_dtypes() if x in allowed and x in caps.dtypes]
      for cls in dict.fromkeys(DTYPES[x].cls for x in dts):
        group = [x for x in dts if DTYPES[x].cls == cls]
        rng.shuffle(group)   # the zero choice takes the first: each dtype its turn across seeds
        out.append(Focus(level, op, tuple(group)))
  rng.shuffle(out)
  return out


def fuzz(backend, examples: int = 100, seed: int = 0, out: Path | None = None, levels=("tensor", "kernel"),
         stages: bool = True, isolate: bool = True, strategy=None, max_ops: int = 6, log=None, timeout: float = 60.0,
         profile: str | None = None, triage=None) -> FuzzReport:
  """Run the properties on `examples` drawn graphs (split over the levels). Each failure
  is shrunk by Hypothesis, cut to the failing node and what it reads, and (with `out`)
  written as a corpus case; the search then goes on, skipping failures of the same
  property, op and dtype, until the examples are spent.

  Without `strategy` the search goes in rounds, one per Focus (foci(): every level, op
  and dtype class of the backend, shuffled by the seed): a first pass draws one example
  of each (Hypothesis's zero choice, which the strategies make an edge-dense one), later
  passes let Hypothesis explore each focus for a few examples. Failures are triaged (see
  the module docstring; `triage` overrides the backend's own)."""
  from hypothesis import given, settings, seed as hseed, HealthCheck, Phase, strategies as st
  from hypothesis.errors import Unsatisfiable
  t0 = time.monotonic()
  runner = Isolated(backend, timeout) if isolate and isinstance(backend, str) else InProcess(backend)
  runner.profile = profile or getattr(runner.caps, "profile", "strict")
  rep = FuzzReport(runner.name, runner.profile)
  stage_backend = None
  if stages:   # the stage graphs are built in this process (a Python backend's stages())
    from tinyspec.backends import get_backend
    try: stage_backend = runner.backend if isinstance(runner, InProcess) else get_backend(backend)
    except (KeyError, TypeError): stage_backend = None
  decomposed = runner.caps.decomposed
  triage = triage or _triage_of(backend, runner)
  levels = [lv for lv in levels if backend_ops(runner.caps, lv)]   # `both` draws the levels the backend runs
  if not levels and strategy is None:
    runner.stop()
    raise NoDrawableOps(f"backend {runner.name} runs no op the graphs can be drawn from at the level(s) asked for "
                        "(its capabilities)")
  seen: set = set()
  budget = examples
  round_ = 0
  plan = foci(runner.caps, levels, seed) if strategy is None else None
  try:
    while budget > 0:
      if plan is None: strat, n = strategy, budget
      else:
        focus = plan[round_ % len(plan)]
        n = min(budget, 1 if round_ < len(plan) else EXPLORE_PER_ROUND)
        strat = backend_strategy(runner.caps, focus.level, max_ops, focus=focus, salt=seed * 7919 + round_)
      strat = with_mutants(strat, round_)
      count, last, shrinks = [0], [None], [0]

      @settings(max_examples=n, deadline=None, database=None, report_multiple_bugs=False, print_blob=False,
                suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
      @hseed(seed + round_)
      @given(strat)
      def prop(pair):
        d, mutant = pair
        count[0] += 1
        if last[0] is not None:
          shrinks[0] += 1
          if shrinks[0] > SHRINK_CALLS: return   # enough: Hypothesis stops, the smallest failure so far is kept
        f = check_mutant(d, mutant)
        if f is not None and f.signature not in seen:
          last[0] = f
          raise PropertyFailed(f)
        kind = None if last[0] is None else ("stages" if last[0].prop.startswith("stage") else last[0].prop)
        f = check_example(d, runner, stage_backend, decomposed, rep.refused, only=kind if kind in ("values", "run", "stages") else None)
        if f is not None and f.signature not in seen:
          last[0] = f
          raise PropertyFailed(f)
      try:
        with warnings.catch_warnings():   # Hypothesis's repr of a failing example (dataclasses of arrays): unused here
          warnings.filterwarnings("ignore", message="Generating overly large repr")
          prop()
      except (PropertyFailed, Unsatisfiable):   # Unsatisfiable: the focus could not be drawn (every attempt refused)
        pass
      except Exception as e:   # Hypothesis could not replay the failure (flaky): keep what it found
        if last[0] is None: raise
        if log: log(f"note: {type(e).__name__} while shrinking; the failure is kept as found")
      rep.examples += count[0]
      budget -= max(count[0], 1)
      round_ += 1
      f = last[0]
      if f is None:
        if plan is None: break
        continue
      if f.node is None: f = _fewer_outputs(f, runner, stage_backend, decomposed)
      elif f.prop == "values": f = _one_element(f, runner, decomposed)
      seen.add(f.signature)
      _record(rep, f, triage, out, log)
  finally:
    runner.stop()
  rep.seconds = time.monotonic() - t0
  return rep


def _triage_of(backend, runner):
  """The backend's triage(failure, out) -> verdict, where it has one, else None."""
  obj = getattr(runner, "backend", None)
  if obj is None and isinstance(backend, str):
    from tinyspec.backends import get_backend
    try: obj = get_backend(backend)
    except (KeyError, TypeError, ValueError): obj = None
  return getattr(obj, "triage", None)


def _record(rep: FuzzReport, f: Failure, triage, out, log) -> None:
  """A found failure into the report, after the backend's triage: a documented bug or a
  limit of its adapter is counted apart; anything else is a failure (kept under out)."""
  v = f.triage = triage(f, Path(out) if out is not None else None) if triage is not None and f.prop != "mutant" else None
  kind, repro = getattr(v, "kind", None), getattr(v, "repro", None)
  if kind == "documented":
    rep.known.append(f)
    if log: log(f"KNOWN {v.bug}: {f}" + (f"\n  repro: {repro} (fails on tinygrad)" if repro else ""))
  elif kind == "unsupported":
    rep.unsupported[v.why] = rep.unsupported.get(v.why, 0) + 1
    if log: log(f"UNSUPPORTED {v.why}: {f}")
  else:
    rep.failures.append(f)
    if log: log(f"NEW {f}\n  " + (f"repro: {repro} (fails on tinygrad)" if repro else f"no repro kept: {v.note}"[:400]) if kind == "new" else f"FAIL {f}")
    if out is not None and f.prop != "mutant": _keep(rep, f, Path(out))   # a mutant's failure is the validator's


def _fewer_outputs(f: Failure, runner, stage_backend, decomposed) -> Failure:
  """A failure of the whole graph (a crash, a refusal, a stage): the graph of one output
  and what it reads, where that alone fails the same way (outputs tried in order)."""
  d = f.drawn
  for i in sorted(d.outputs.values()):
    small = d.outputs_only([i])
    if len(small.graph.nodes) >= len(d.graph.nodes): continue
    g = check_example(small, runner, stage_backend, decomposed)
    if g is not None and g.signature == f.signature: return g
  return f


def _one_element(f: Failure, runner, decomposed) -> Failure:
  """A value failure of a tensor graph of per-element ops: the same graph on one element
  of each input (the elements a failing position reads), where that fails the same way.
  Hypothesis shrinks the draws; this shrinks the data."""
  from tinyspec.tables import tables
  d = f.case()
  T = tables()
  if d.level != "tensor" or any(T.ops[d.graph.nodes[i].op].category not in ("elementwise", "decomposed") for i in d.outputs.values()):
    return f
  views = _views(d.graph)
  shape = views[max(d.outputs.values())].shape
  for p in range(min(int(np.prod(shape)) if shape else 1, 32)):
    small = _at_position(d, views, np.unravel_index(p, shape) if shape else ())
    if small is None: continue
    h = check_example(small, runner, None, decomposed, only="values")
    if h is not None and h.signature == f.signature: return h
  return f


def _at_position(d: Drawn, views, pos: tuple) -> Drawn | None:
  """d with every BUFFER holding the one element that position `pos` of the (broadcast)
  output reads, its dims all 1 (one shape operand per rank)."""
  from tinyspec.validate import validate
  g = d.graph
  nodes, ins, new, ones = [], {}, {}, {}
  for i, n in enumerate(g.nodes):
    if n.op == "BUFFER":
      sh = views[i].shape
      if len(sh) not in ones:
        nodes.append(Node("VCONST", [], {"values": [1] * len(sh), "dtype": "index"}))
        ones[len(sh)] = len(nodes) - 1
      name = f"buf{n.arg['slot']}"
      idx = tuple(pos[len(pos) - len(sh) + k] if sh[k] > 1 else 0 for k in range(len(sh)))
      ins[name] = np.asarray(d.inputs[name])[idx].reshape((1,) * len(sh))
      nodes.append(Node("BUFFER", [ones[len(sh)]], thaw(n.arg)))
    else:
      nodes.append(Node(n.op, [new[j] for j in n.src], thaw(n.arg)))
    new[i] = len(nodes) - 1
  outs = {k: new[i] for k, i in d.outputs.items()}
  known = {new[i]: ins[f"buf{g.nodes[i].arg['slot']}"] if g.nodes[i].op == "BUFFER" else v for i, v in d.values.items()}
  order = [outs[f"out{k}"] for k in range(len(outs))]
  small = Drawn(Graph(nodes, order, "tensor"), ins, "tensor", outs, known, d.tables).outputs_only(order)
  return small if validate(small.graph).ok else None


def _keep(rep: FuzzReport, f: Failure, out: Path) -> None:
  """Write f under out; an out that cannot be written is reported, not a crash of the search."""
  from tinyspec.files import FileRefused
  try: rep.written.append(write_failure(f, out))
  except FileRefused as e: rep.unwritten.append(e)


def write_failure(f: Failure, out: Path) -> Path:
  """The minimal failing case as a corpus case under out/fuzz/<signature>-<hash>/."""
  from tinyspec.conformance.corpus.casegen import Draft, write_draft
  from tinyspec.files import make_dir
  make_dir(out)   # FileRefused path.write where it cannot be made
  m = f.case()
  h = hashlib.sha256(m.graph.dumps().encode()).hexdigest()[:10]
  cid = f"fuzz/{(f.op or 'graph')}-{f.dtype or 'any'}-{h}"
  write_draft(Draft(cid, m.graph, dict(m.inputs), [(f.op, f.dtype)] if f.op and f.dtype else [], f"found by tinyspec fuzz: {f}"[:500]), out)
  return out / cid
