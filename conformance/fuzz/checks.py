"""The properties a backend is held to on drawn graphs (conformance/fuzz/graphs.py); the
fuzz (driver.py) checks them on every example.

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
(the failing node and what it reads). A backend's refusal with a rule id (Refused, raised
by the runners of runners.py) is counted, not failed.
"""
from __future__ import annotations
import re
from dataclasses import dataclass, field
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.graph import Graph
from tinyspec.validate import validate
from tinyspec.intervals import NUMPY_TYPES as NP, is_float_type
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.conformance.run.compare import bits, describe, element_bounds
from tinyspec.conformance.fuzz.graphs import Drawn
from tinyspec.conformance.fuzz.localcheck import local_reference
from tinyspec import portable as P
from tinyspec.conformance.corpus.casegen import input_names


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
def views_of(g: Graph):
  """The validator's view (dtype, shape, min_max ...) of every node of a drawn graph."""
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
  if is_float_type(got.dtype):
    a, b = got.astype(np.float64), ref.astype(np.float64)
    return bool(np.all((bits(got) == bits(ref)) | (np.isnan(a) & np.isnan(b))))
  return bool(np.array_equal(got, ref))


def check_values(d: Drawn, outputs: dict, decomposed: bool, views=None, trace: dict | None = None, profile: str = "strict") -> Failure | None:
  """The first output node (in graph order) whose value is not the reference's value of
  its op on the values of its sources (in the portable profile: nor any result the
  decisions allow, tinyspec.portable). `trace`: the reference's own values of the nodes
  (refimpl trace=True); a value equal to it passes at once."""
  views = views or views_of(d.graph)
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
    if got.dtype != NP[dt]: return Failure("values", i, n.op, dt, f"dtype {got.dtype}, expected {dt}", d)
    if d.level == "kernel" and np.shape(want) == () and got.ndim == 1:
      want = np.broadcast_to(want, got.shape)   # a value the loop does not change, stored at every element
    bounds, alts = element_bounds(n.op, n.arg, dt, operands, want, decomposed, profile), []
    if profile == "portable":
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
  try: return evaluate(d.graph, d.inputs, trace=True).values, None
  except Exception as e:   # the reference itself fails on a valid graph: a finding too
    return None, Failure("reference", None, None, None, f"the reference evaluator fails: {type(e).__name__}: {e}"[:800], d)


def check_min_max(d: Drawn, views=None, trace: dict | None = None) -> Failure | None:
  views = views or views_of(d.graph)
  if trace is None:
    trace, f = reference_trace(d)
    if f: return f
  for i in sorted(trace):
    v, view = trace[i], views[i]
    if view is None or view.min_max is None or not isinstance(v, np.ndarray) or not isinstance(view.dtype, str): continue
    cls = DTYPES[view.dtype].cls
    x = v.astype(np.float64) if cls == "float" else v.astype(object) if DTYPES[view.dtype].is_int else v.astype(np.int64)
    if cls == "float": x = x[~np.isnan(x)]
    if x.size == 0: continue
    lo, hi = view.min_max
    mn, mx = x.min(), x.max()
    if mn < lo or mx > hi:
      return Failure("min_max", i, d.graph.nodes[i].op, view.dtype, f"values in [{mn}, {mx}] outside the derived min_max [{lo}, {hi}]", d)
  return None


def check_valid(d: Drawn) -> Failure | None:
  res = validate(d.graph)
  if res.ok: return None
  x = res.diagnostics[0]
  return Failure("valid", x.node, x.op, None, f"the validator rejects a drawn graph: {x.format()}", d)


def check_stages(d: Drawn, backend, decomposed: bool, trace: dict | None = None) -> Failure | None:
  """Every stage graph of the backend is valid and computes what the reference allows."""
  try: stages = backend.stages(d.graph)
  except Exception as e:
    if isinstance(getattr(e, "rule", None), str): return None   # refused with a rule id: counted by the run itself
    return Failure("stages", None, None, None, f"{type(e).__name__}: {e}"[:500], d)
  for name, g in stages.items():
    if name == "input": continue
    res = validate(g)
    if not res.ok: return Failure(f"stage {name}", None, None, None, "invalid stage graph: " + res.diagnostics[0].format(), d)
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
  """The validator rejects a mutant (mutations.Mutant) with its tagged rule at its node."""
  if m is None: return None
  got = [(x.rule, x.node) for x in validate(m.graph, tables=d.tables).diagnostics]
  if (m.rule, m.node) in got: return None
  return Failure("mutant", m.node, m.graph.nodes[m.node].op if m.node is not None and m.node < len(m.graph.nodes) else None, None,
                 f"mutation {m.how} should break {m.rule} at node {m.node}; the validator reports {got or 'nothing'}: {m.graph.dumps()}"[:2000], d)


def check_example(d: Drawn, runner, stage_backend=None, decomposed: bool = False, refused: dict | None = None,
                  only: str | None = None) -> Failure | None:
  """The properties on one drawn graph: the first failure, or None. A refusal with a rule
  id is counted in `refused` (rule -> count) and is no failure. `only` ("values",
  "run" or "stages"): while shrinking a failure, check just its kind of property."""
  f = check_valid(d)
  if f: return f
  views = views_of(d.graph)
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
