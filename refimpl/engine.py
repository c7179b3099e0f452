"""evaluate(): validate, plan, run, collect the outputs.

Inputs and outputs are keyed as docs/architecture.md says: a storage's input name is its
arg's `name`, else `buf{slot}` (BUFFER) or `param{slot}` (PARAM); a bare int k means
`buf{k}`. Outputs: `out{k}` for the k-th root when it is a value (`out{k}.{j}` for the
elements of a tuple root); for void roots, every GLOBAL storage some STORE wrote, under
its input name, with its final contents. Storage with no input starts zeroed; a
symbolic size (a ()-shaped integer PARAM with bounds) must be given.
"""
from __future__ import annotations
import gc
from dataclasses import dataclass, field
import numpy as np
from tinyspec.graph import Graph
from tinyspec.tables import tables
from tinyspec.dispatch import input_name
from tinyspec.uop import UOp
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import supported_ops, role
from tinyspec.refimpl.budget import Budget
from tinyspec.refimpl.numeric import NP
from tinyspec.refimpl.plan import Plan
from tinyspec.refimpl.prepared import Prepared, prepare
from tinyspec.refimpl.scope import Scope
from tinyspec.refimpl.storage import Storage, merge_effects
from tinyspec.portable import variants as known
from tinyspec.refimpl.widen import VARIANT
from tinyspec.refimpl.widen import widen_intermediates
from tinyspec.intervals import NUMPY_TYPES
from tinyspec.dtypes import DTYPES


@dataclass
class EvalResult:
  """evaluate(..., trace=True): the outputs, and every node's value by node index. Kernel
  values have one leading axis per loop axis (`loop_axes[k]` is the RANGE/SPECIAL node
  of axis k; size 1 where the value does not depend on it). Void nodes have no entry; a
  node evaluated more than once (a function body called twice) keeps its last value."""
  outputs: dict
  values: dict = field(default_factory=dict)
  loop_axes: dict = field(default_factory=dict)   # node -> the loop axes (node indices) of its scope
  peak_bytes: int = 0

  def __getitem__(self, k): return self.outputs[k]
  def __iter__(self): return iter(self.outputs)
  def __len__(self): return len(self.outputs)
  def keys(self): return self.outputs.keys()
  def items(self): return self.outputs.items()


def as_graph(graph) -> Graph:
  if isinstance(graph, Graph): return graph
  if isinstance(graph, UOp): return Graph.from_uops(graph)
  if isinstance(graph, (list, tuple)) and graph and all(isinstance(u, UOp) for u in graph): return Graph.from_uops(*graph)
  raise TypeError(f"evaluate() takes a tinyspec Graph, a UOp or a list of root UOps, not {type(graph).__name__}")


def evaluate(graph, inputs=None, *, trace=False, budget=None, level="auto", allow_untrusted=False, strict_bounds=False, variants=(),
             zeros=True, cast=False):
  """Evaluate a graph with NumPy, exactly as the tables say. Returns {name: array}, or with
  trace=True an EvalResult. Raises EvalError for invalid graphs (carrying the
  validator's diagnostics), untrusted ops, inputs that do not fit, and values over the
  memory budget.

  strict_bounds=True is a debugging aid for compilers: an out-of-range kernel access that
  no gate covers (a LOAD's gate, an IF, a STORE's gate) raises EvalError (rule eval.oob)
  instead of getting decision index-oob's answer (reads zero, writes nothing), since a
  compiled kernel must realize that decision with a gate of its own.

  variants names alternative semantics of the decisions (the `variant:` results of their
  `allowed:` entries: `flush` subnormals, `fused` and `wide` MULACC): the value a backend
  that chose them computes, one of the results the portable profile accepts.

  zeros: a BUFFER or PARAM with no input starts as zeros; zeros=False refuses (rule
  eval.input) an evaluation that reads the contents of one (`tinyspec eval` without
  --zeros). cast=False refuses (rule eval.input) an input whose dtype is not its buffer's;
  cast=True converts one whose every value converts exactly."""
  out, m = run(graph, inputs, trace=trace, budget=budget, level=level, allow_untrusted=allow_untrusted, strict_bounds=strict_bounds,
               variants=variants, zeros=zeros, cast=cast)
  if trace: return EvalResult(out, m.trace, m.trace_axes, m.budget.peak)
  return out


def run(graph, inputs=None, *, trace=False, budget=None, level="auto", allow_untrusted=False, strict_bounds=False, variants=(),
        zeros=True, cast=False):
  """evaluate() that also returns the Machine (its .budget.peak says how many bytes the
  evaluation held at most)."""
  g = as_graph(graph)
  prep = prepare(g, level)
  bad = sorted(set(variants) - known())
  if bad: raise EvalError(f"unknown variant {', '.join(bad)} (the tables' variants: {', '.join(sorted(known()))})", rule="eval.input", exit_code=2)
  if VARIANT in variants: g, prep = widened(g, prep, level)   # a graph-wide variant: evaluated as the graph it rewrites to
  m = Machine(g, prep, inputs, trace, Budget(budget), allow_untrusted, strict_bounds)
  m.variants = frozenset(variants)
  m.zeros, m.cast = bool(zeros), bool(cast)
  # An evaluation allocates many small objects (effect maps, versions, views) that die by
  # reference counting; the cyclic GC would rescan the process's long-lived objects (the
  # prepared graphs among them) again and again meanwhile. It runs again afterwards.
  was = gc.isenabled(); gc.disable()
  try:
    with np.errstate(all="ignore"):
      out = m.run()
  finally:
    if was: gc.enable()
  return out, m


def widened(g: Graph, prep: Prepared, level: str):
  """The `wide` variant's graph (refimpl/widen.py) and its Prepared, made once per prepared graph."""
  if prep.widened is None:
    wide = widen_intermediates(g, prep.views)
    try: wprep = prepare(wide, level)
    except EvalError as e:
      why = e.diagnostics[0].format() if e.diagnostics else str(e)
      raise EvalError(f"internal error: the {VARIANT} graph is invalid: {why}", rule="eval.internal") from None
    prep.widened = (wide, wprep)
  return prep.widened


def _numpy_can_hold(shape) -> bool:
  """NumPy refuses a shape whose nonzero dims multiply past intp, even with a zero dim."""
  if type(shape) is not tuple: return True
  n = 1
  for d in shape:
    if type(d) is int and d: n *= d
  return n * 16 < 1 << 63


class Machine:
  """One evaluation: the validated graph, the inputs, the budget, the trace."""

  def __init__(self, g: Graph, prep: Prepared, inputs, trace, budget: Budget, allow_untrusted, strict_bounds=False):
    self.g, self.prep, self.nodes, self.views, self.level = g, prep, prep.nodes, prep.views, prep.level
    self.T = tables()
    self.tracing = bool(trace)
    self.trace: dict = {}
    self.trace_axes: dict = {}
    self.budget = budget
    self.allow_untrusted = allow_untrusted
    self.strict_bounds = bool(strict_bounds)
    self.variants: frozenset = frozenset()
    self.zeros, self.cast = True, False   # missing inputs start as zeros; a dtype mismatch is refused (evaluate())
    self.inputs = self._inputs(inputs)
    self.used_inputs: set[str] = set()
    self.storages: dict = {}

  # ---------------------------------------------------------------- inputs
  def _inputs(self, inputs) -> dict:
    out = {}
    for k, v in (inputs or {}).items():
      name = input_name("BUFFER", {"slot": int(k)}) if isinstance(k, (int, np.integer)) and not isinstance(k, bool) else str(k)
      if name in out: raise EvalError(f"input {name!r} is given twice", rule="eval.input", exit_code=2)
      if isinstance(v, np.ndarray): self.budget.external(v, f"input {name!r}")   # inputs count from the start
      out[name] = v
    return out

  def input_name(self, i) -> str:
    n = self.nodes[i]
    return input_name(n.op, n.arg)

  def global_storage(self, i) -> Storage:
    view = self.views[i]
    name = self.input_name(i)
    st = self.storages.get(name)
    if st is None:
      initial = self.input_array(name, view, i)
      st = self.storages[name] = Storage(name, name, view.dtype, view.shape, "GLOBAL", initial)
      if name not in self.inputs and not self.zeros and initial.size:   # refused if its contents are read (storage.materialize)
        st.missing = EvalError(f"{self.nodes[i].op} {name!r} ({view.dtype}, shape {tuple(view.shape)}) is read but no input gives it: "
                               f"pass one (--input {name}=FILE.npy) or ask for zeros (--zeros)", i, self.nodes[i].op,
                               rule="eval.input", exit_code=2)
    return st

  def input_array(self, name, view, i) -> np.ndarray:
    dt = NP[view.dtype]
    shape = tuple(view.shape)
    if name not in self.inputs:
      if len(self.nodes[i].src) == 3:
        raise EvalError(f"the symbolic size {name!r} needs a value (an input)", i, self.nodes[i].op, rule="eval.input", exit_code=2)
      self.budget.need(dt.itemsize * int(np.prod(shape, dtype=np.int64)), i, self.nodes[i].op, "its zero-filled contents")
      z = np.zeros(shape, dt)
      self.budget.track(z)
      return z
    self.used_inputs.add(name)
    a = self.inputs[name]
    try: arr = np.asarray(a)
    except Exception as e: raise EvalError(f"input {name!r} is not an array: {e}", i, rule="eval.input", exit_code=2) from None
    if arr.shape != shape:
      raise EvalError(f"input {name!r} has shape {arr.shape}, the graph needs {shape}", i, self.nodes[i].op, rule="eval.input", exit_code=2)
    if arr.dtype != dt:
      # a list or a Python number has no dtype to keep, a symbolic size is a number (as the compiled
      # backends read it): converted exactly
      if not self.cast and isinstance(a, (np.ndarray, np.generic)) and len(self.nodes[i].src) != 3:
        raise EvalError(f"input {name!r} has dtype {arr.dtype}, the graph's {self.nodes[i].op} is {view.dtype}: convert it, or allow "
                        "an exact conversion (cast=True, --cast)", i, self.nodes[i].op, rule="eval.input", exit_code=2)
      conv = self._convert(arr, dt)
      if conv is None:
        raise EvalError(f"input {name!r} has dtype {arr.dtype}, the graph needs {view.dtype} and the values do not convert exactly",
                        i, self.nodes[i].op, rule="eval.input", exit_code=2)
      arr = conv
    self.budget.external(arr)
    return arr

  @staticmethod
  def _convert(arr, dt):
    """arr as dtype dt when every value converts exactly (NaN to NaN), else None."""
    if arr.dtype == object or arr.dtype.kind in "USV" and arr.dtype.names: return None
    try:
      with np.errstate(all="ignore"):
        out = arr.astype(dt)
        back = out.astype(arr.dtype)
    except (TypeError, ValueError): return None
    same = (back == arr) | ((back != back) & (arr != arr))
    return out if np.all(same) else None

  # ---------------------------------------------------------------- running
  def plan(self, order, kernel: bool, roots, linear=None) -> Plan:
    """The static plan of one scope (made once per graph content: refimpl/prepared.py)."""
    return self.prep.plan(order, kernel, roots, linear, self.tracing)

  def closure(self, roots) -> list[int]:
    """Nodes the roots need, without entering FUNCTION/CALL bodies (their own scopes)."""
    key = tuple(roots)
    got = self.prep.closures.get(key)
    if got is None: got = self.prep.closures[key] = self._closure(roots)
    return got

  def _closure(self, roots) -> list[int]:
    seen, stack = set(), list(roots)
    nodes = self.nodes
    while stack:
      i = stack.pop()
      if i in seen: continue
      seen.add(i)
      n = nodes[i]
      stack.extend(n.src[1:] if role(n.op) == "call" else n.src)
    return sorted(seen)

  def _check_ops(self, roots):
    """Every op the evaluation can reach must have a unit; untrusted ones are refused; every
    value's dtype needs a NumPy type (bfloat16: ml_dtypes). Once per graph content and roots."""
    if tuple(roots) in self.prep.checked: return
    supported = supported_ops()
    seen, stack = set(), list(roots)
    while stack:
      i = stack.pop()
      if i in seen: continue
      seen.add(i)
      n = self.nodes[i]
      op = self.T.ops[n.op]
      if op.untrusted:
        if not self.allow_untrusted:
          raise EvalError(f"{n.op} is untrusted (op.untrusted in spec/ops.yaml): refused; pass allow_untrusted=True to accept it",
                          i, n.op, rule="eval.untrusted")
        raise EvalError(f"{n.op} is opaque: the tables give it no semantics, so there is nothing the reference evaluator can run "
                        "(allow_untrusted only stops the refusal)", i, n.op, rule="eval.untrusted")
      if n.op not in supported: raise EvalError(f"the reference evaluator has no unit for {n.op}", i, n.op, rule="eval.unsupported")
      dt = self.views[i].dtype
      if isinstance(dt, str) and DTYPES[dt].np and dt not in NUMPY_TYPES:
        raise EvalError(f"{dt} values need the ml_dtypes package (pip install ml_dtypes)", i, n.op, rule="eval.unsupported")
      if isinstance(dt, str) and not _numpy_can_hold(self.views[i].shape):
        raise EvalError(f"NumPy cannot hold an array of shape {self.views[i].shape}: its nonzero dims multiply past 2^63 (a valid "
                        "empty shape, but no NumPy array has it)", i, n.op, rule="eval.unsupported")
      stack.extend(n.src)
    self.prep.checked.add(tuple(roots))

  def run(self) -> dict:
    roots = self.g.root_indices
    self._check_ops(roots)
    if self.level == "program":
      (r,) = roots[-1:]
      lin = r if self.nodes[r].op == "LINEAR" else self.nodes[r].src[0] if self.nodes[r].op == "PROGRAM" else None
      if lin is None or self.nodes[lin].op != "LINEAR":
        raise EvalError(f"a program-level graph is evaluated from its LINEAR (or PROGRAM) root, and this root is {self.nodes[r].op} "
                        "(a kernel SINK is a kernel-level graph: drop `level: program` or pass --level kernel)", r, self.nodes[r].op,
                        rule="eval.unsupported")
      order = list(self.nodes[lin].src) + [lin] + ([r] if r != lin else [])
      plan = self.plan(order, True, roots, list(self.nodes[lin].src))
      scope = Scope(self, plan, "kernel")
    else:
      kernel = self.level == "kernel"
      plan = self.plan(self.closure(roots), kernel, roots)
      scope = Scope(self, plan, "kernel" if kernel else "tensor")
    scope.run()
    unused = set(self.inputs) - self.used_inputs
    if unused:
      raise EvalError(f"input(s) {', '.join(sorted(unused))} name no BUFFER or PARAM of the graph (known: "
                      f"{', '.join(sorted(self.storages)) or 'none'})", rule="eval.input", exit_code=2)
    return self.outputs(scope, roots)

  def outputs(self, scope, roots) -> dict:
    out, effs = {}, []
    for k, r in enumerate(roots):
      v = scope.values.get(r)
      if self.views[r].dtype == "void": effs.append(scope.eff.get(r))
      elif isinstance(v, tuple):
        for j, x in enumerate(v): out[f"out{k}.{j}"] = self.strip(scope, x)
      elif v is not None: out[f"out{k}"] = self.strip(scope, v)
    for key, ver in (merge_effects(effs) or {}).items():
      st = ver.storage
      if not st.output or ver is st.base or not isinstance(key, str): continue
      arr = scope.materialize(ver, 0, roots[-1])
      # contents some write built: a private array no one else holds once the evaluation ends
      own = not self.tracing and ver.write is not None and isinstance(arr, np.ndarray) and arr.base is None
      out[st.name] = self.strip(scope, arr, own)
    return out

  def strip(self, scope, x, own=False) -> np.ndarray:
    """An output array: the caller's own copy (`own`: x already is), without loop axes when it does not vary."""
    x = np.asarray(x)
    if own: x.flags.writeable = True
    R = scope.R
    if R and all(d == 1 for d in x.shape[:R]): x = x.reshape(x.shape[R:])
    return x if own or (x.base is None and x.flags.writeable) else x.copy()

  def run_function(self, body, args):
    plan = self.plan(self.closure([body]), False, [body])
    scope = Scope(self, plan, "function", bindings=dict(enumerate(args)))
    scope.run()
    return scope.values[body], scope.eff.get(body)

  def run_kernel(self, body, args, call) -> dict:
    """Run a CALLed kernel on its arguments; {slot: final contents} of the PARAMs it wrote."""
    n = self.nodes[body]
    if n.op == "SINK":
      plan = self.plan(self.closure([body]), True, [body])
    else:
      lin = n.src[0]
      order = list(self.nodes[lin].src) + [lin, body]
      plan = self.plan(order, True, [body], list(self.nodes[lin].src))
    scope = Scope(self, plan, "kernel", bindings=dict(enumerate(args)))
    scope.run()
    out = {}
    for key, ver in (scope.eff.get(body) or {}).items():
      if isinstance(key, tuple) and key[1] == "param" and ver is not ver.storage.base:
        arr = scope.materialize(ver, 0, body)
        out[key[2]] = arr.reshape(arr.shape[scope.R:]) if scope.R else arr
    return out

  def record(self, scope, i, val):
    if val is None: return
    self.trace[i] = val
    if scope.R: self.trace_axes[i] = tuple(scope.plan.loop_nodes)


