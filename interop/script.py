"""Run a tinygrad script, import everything it realizes, check it against the spec.

    res = import_script("interop/programs/softmax.py")   # runs it under interop.capture
    res.graphs      # one GraphResult per graph: r0.tensor, r0.k1.kernel, r0.k1.program ...
    res.write(out)  # graph files, inputs (.npz) and tinygrad's results (.npy), report.json

For each realize of the script: the tensor-level graph of the realized tensors (inputs:
the buffers they read, keyed buf{slot}; expected: tinygrad's realized values, out{k}),
and for each kernel of its schedule the kernel SINK (inputs: the CALL's buffers before
it ran, keyed param{k}; expected: the same buffers after) and the lowered program
(`codegen.to_program`). Non-kernel schedule items (COPY) are counted, not imported.
Checking a graph validates it and evaluates it with the reference evaluator on the same
inputs, comparing with tinygrad's values (interop.compare).
"""
from __future__ import annotations
import json
import os
import runpy
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from tinyspec.dispatch import input_name
from tinyspec.interop.tinygrad_import import ImportReport, import_uops, import_program
from tinyspec.interop.tinygrad_assign import stored_buffers
from tinyspec.interop.capture import Unreadable, storage_dtype, capture
from tinyspec.validate import validate
from tinyspec.backends import get_backend
from tinyspec.interop.compare import compare
from tinyspec.files import make_dir, output_path, save_npy, save_npz, write_file
from tinyspec.intervals import np_dtype
from tinyspec.dtypes import canonical


@dataclass
class GraphResult:
  name: str                     # r{realize}.tensor, r{realize}.k{call}.kernel, r{realize}.k{call}.program
  level: str
  graph: object                 # tinyspec Graph
  report: ImportReport
  inputs: dict = field(default_factory=dict)
  expected: dict = field(default_factory=dict)
  diagnostics: list = field(default_factory=list)
  evaluation: str = "not run"   # "ok: ...", "mismatch: ...", "error: ...", "not run"
  runs: dict = field(default_factory=dict)   # backend -> "ok: ...", "mismatch: ...", "refused: ..." (--backend)
  checked: bool = False
  unread: list = field(default_factory=list)   # outputs whose tinygrad value could not be read: never checked, said so
  unread_reasons: dict = field(default_factory=dict)   # output name -> why the capture left it unread (where it knows)
  reference: dict = field(default_factory=dict)   # the reference evaluator's outputs on self.inputs (what the written files give)
  limitation: str = ""          # why the capture could not give what judging the values needs (validated, not evaluated)

  def __post_init__(self):
    self.inputs = read_by(self.graph, self.inputs)   # what the graph reads, which is what its inputs file holds

  @property
  def valid(self) -> bool: return self.checked and not self.diagnostics

  @property
  def eval_ok(self) -> bool: return self.evaluation.startswith("ok") and all(r.startswith("ok") for r in self.runs.values())

  def check(self, evaluate: bool = True, backends=()) -> "GraphResult":
    """Validate, then (evaluate=True, and for a graph with expected values) evaluate with the
    reference evaluator and compare; run it on each of backends too (compiled: c, opencl),
    judged within the same error bound."""
    res = validate(self.graph)
    self.diagnostics, self.checked = list(res.diagnostics), True
    if self.limitation:
      self.evaluation = f"unchecked: capture limitation: {self.limitation}"
      return self
    if not evaluate or not (self.expected or self.unread): return self
    if not res.ok:
      self.evaluation = "not run: invalid graph"
      return self
    if missing := missing_inputs(self.graph, self.inputs):   # the inputs file must give every buffer: `tinyspec eval` refuses otherwise
      self.evaluation = f"error: no input for {', '.join(missing)} [eval.input]"
      return self
    self.evaluation, bounds, self.reference = _evaluate_and_compare(self.graph, self.inputs, self.expected)
    for b in backends: self.runs[b] = run_and_compare(b, self.graph, self.inputs, self.expected, bounds)
    if self.unread:
      why = "".join(f" ({n}: {r})" for n, r in self.unread_reasons.items() if n in self.unread)
      self.evaluation = f"unchecked: tinygrad's {', '.join(self.unread)} could not be read{why}; {self.evaluation}"
    return self

  def summary(self) -> dict:
    return {"name": self.name, "level": self.level, "nodes": len(self.graph.nodes), "valid": self.valid,
            "errors": [d.format() for d in self.diagnostics], "evaluation": self.evaluation,
            **({"runs": dict(self.runs)} if self.runs else {}), **self.report.to_json()}


def _evaluate_and_compare(graph, inputs: dict, expected: dict) -> tuple[str, dict | None, dict]:
  """(the verdict, the error bounds of the outputs or None where none could be built, the
  reference's outputs)."""
  from tinyspec.refimpl import evaluate, EvalError  # noqa: PLC0415 (start-up time: the reference loads only when a graph is evaluated, not for import-tinygrad --no-eval)
  from tinyspec.refimpl.errorbound import evaluate_with_bounds  # noqa: PLC0415 (start-up time: the reference loads only when a graph is evaluated, not for import-tinygrad --no-eval)
  bounds, no_bound = {}, ""
  try:
    got, bounds = evaluate_with_bounds(graph, dict(inputs))
  except Exception as e:   # noqa: BLE001 (no bound for this graph: evaluated alone, judged by ulps, said)
    no_bound = f" (no error bound: {str(e).splitlines()[0][:120]})"
    try:
      got = evaluate(graph, inputs)
    except EvalError as e:
      return f"error: {str(e).splitlines()[0]}", None, {}
    except Exception as e:   # noqa: BLE001 (a crash in the evaluator is a finding, reported)
      return f"error: {type(e).__name__}: {e}"[:300], None, {}
  verdict = _judge(got, expected, None if no_bound else bounds, "reference", no_bound, _required(graph, expected))
  return verdict, (None if no_bound else bounds), got


def run_and_compare(backend: str, graph, inputs: dict, expected: dict, bounds: dict | None) -> str:
  """Run the graph on a backend (c, opencl ...) and judge its outputs against tinygrad's
  within the reference's error bounds: 'ok: ...', 'mismatch: ...' or 'refused: ...'."""
  try:
    got = get_backend(backend).run(graph, {k: np.array(v, copy=True) for k, v in inputs.items()})
  except Exception as e:   # noqa: BLE001 (a refusal, with its rule id where it has one, is the finding)
    rule = f" [{e.rule}]" if getattr(e, "rule", None) else ""
    return f"refused: {type(e).__name__}: {str(e).splitlines()[0][:200]}{rule}"
  return _judge(got, expected, bounds, backend, "" if bounds is not None else " (no error bound)", _required(graph, expected))


def _required(graph, expected: dict) -> list:
  """The results a graph must give: at tensor level every one tinygrad's realize gave (its
  outputs and the buffers it stored into); a kernel's expected buffers include the ones it
  only reads, which it does not output."""
  return sorted(expected) if graph.level == "tensor" else []


def _judge(got: dict, expected: dict, bounds: dict | None, who: str, note: str, required=()) -> str:
  if lost := [k for k in required if k not in got]: return f"mismatch: {who} gives no {', '.join(lost)}{note}"
  names = [k for k in got if k in expected]
  if not names: return f"mismatch: no common outputs ({who} {sorted(got)}, tinygrad {sorted(expected)})"
  notes = []
  for k in names:
    c = compare(expected[k], got[k], bounds.get(k) if bounds is not None else None, who)
    if not c.ok: return f"mismatch: {k}: {c.message}{note}"
    notes.append(f"{k} {c.message}")
  return "ok: " + ", ".join(notes) + note


@dataclass
class ScriptResult:
  script: str
  graphs: list = field(default_factory=list)
  schedule: Counter = field(default_factory=Counter)   # CALL body kinds: SINK (kernels), COPY ...
  error: str | None = None                             # the script raised
  seconds: float = 0.0

  @property
  def report(self) -> ImportReport:
    r = ImportReport()
    for g in self.graphs: r.merge(g.report)
    return r

  @property
  def ok(self) -> bool:
    return self.error is None and all(g.valid and (g.eval_ok or not (g.expected or g.unread)) for g in self.graphs)

  def counts(self) -> dict:
    c = Counter()
    for g in self.graphs:
      c[f"{g.level}"] += 1
      c[f"{g.level} valid"] += g.valid
      if g.evaluation != "not run": c[f"{g.level} evaluated"] += 1
      c[f"{g.level} eval ok"] += g.evaluation.startswith("ok")
      for b, r in g.runs.items(): c[f"{g.level} {b} ok"] += r.startswith("ok")
    return dict(c)

  def summary(self) -> dict:
    return {"script": self.script, "ok": self.ok, "error": self.error, "seconds": round(self.seconds, 2),
            "schedule": dict(self.schedule), "counts": self.counts(), "import": self.report.to_json(),
            "graphs": [g.summary() for g in self.graphs]}

  def write(self, out: Path | str) -> None:
    """Graph files (NAME.json), their inputs (NAME.inputs.npz, keyed as the reference
    evaluator takes them) and tinygrad's results (NAME.OUTPUT.npy), and import-report.json."""
    out = make_dir(out)   # names are sanitized (tinygrad's buffer names among them): nothing lands outside out
    for g in self.graphs:
      write_file(output_path(out, g.name, ".json", "graph name"), g.graph.dumps())
      if g.inputs: save_npz(output_path(out, g.name, ".inputs.npz", "graph name"), g.inputs)
      for k, v in g.expected.items(): save_npy(out, f"{g.name}.{k}", v, "output name")
    write_file(out / "import-report.json", json.dumps(self.summary(), indent=1) + "\n")


def import_script(path, check: bool = True, evaluate: bool = True, programs: bool = True, backends=()) -> ScriptResult:
  """Run the tinygrad script at path (as `python path` would: its folder first on sys.path,
  run as __main__) and import what it realizes; check=True validates (and evaluate=True
  evaluates, and runs on each of backends) every graph."""
  path = Path(path)
  res = ScriptResult(str(path))
  t0 = time.perf_counter()
  old_path, old_argv = list(sys.path), list(sys.argv)
  sys.path.insert(0, str(path.resolve().parent))
  sys.argv = [str(path)]
  try:
    with capture() as cap:
      try:
        runpy.run_path(str(path), run_name="__main__")
      except SystemExit as e:
        if e.code not in (None, 0): res.error = f"the script exited with {e.code}"
      except Exception as e:   # noqa: BLE001 (the script's own failure is reported, not raised)
        where = traceback.extract_tb(e.__traceback__)[-1]
        res.error = f"{type(e).__name__}: {e} (at {os.path.basename(where.filename)}:{where.lineno})"
  finally:
    sys.path[:], sys.argv[:] = old_path, old_argv
  for r in cap.realizations:
    res.graphs.append(_tensor_graph(r))
    for c in r.calls:
      res.schedule[c.kind] += 1
      if c.kind != "SINK": continue
      k = _kernel_graph(r, c)
      res.graphs.append(k)
      if programs and (p := c.program()) is not None:
        res.graphs.append(program_graph(r, c, k, p))
  if check:
    for g in res.graphs: g.check(evaluate, backends)
  res.seconds = time.perf_counter() - t0
  return res


def missing_inputs(graph, inputs: dict) -> list[str]:
  """The input names of the graph's global BUFFERs (and, in a kernel or program, its PARAMs)
  that inputs does not give (a kernel's REG and LOCAL buffers are its own scratch)."""
  kinds = ("BUFFER",) if graph.level == "tensor" else ("BUFFER", "PARAM")
  names = {input_name(n.op, n.arg) for n in graph.nodes if n.op in kinds and isinstance(n.arg, dict) and "slot" in n.arg
           and n.arg.get("addrspace", "GLOBAL") == "GLOBAL"}
  return sorted(names - set(inputs))


def read_by(graph, arrays: dict) -> dict:
  """arrays (keyed by input name) less those no BUFFER or PARAM the graph's roots reach holds: a buffer
  tinygrad binds that the graph does not read (a lowered program whose optimizer dropped a
  kernel's load, x ** 0 at tensor level), which `tinyspec eval` would refuse as unknown."""
  seen, todo, held = set(), list(graph.root_indices), set()
  while todo:
    if (i := todo.pop()) in seen: continue
    seen.add(i)
    n = graph.nodes[i]
    todo.extend(n.src)
    if n.op in ("BUFFER", "PARAM") and isinstance(n.arg, dict) and "slot" in n.arg: held.add(input_name(n.op, n.arg))
  return {k: a for k, a in arrays.items() if k in held}


def _tensor_graph(r) -> GraphResult:
  """The realize's tensor graph: a root per tensor given (out{k}), and a GROUP of its STOREs
  into buffers, whose contents after the realize are results too (buf{slot})."""
  from tinygrad.uop.ops import Ops, UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.dtype import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  meta = {"realize": r.index, **({"unrealized outputs": [f"out{k}" for k in r.unrealized]} if r.unrealized else {})}
  stored = stored_buffers(r.roots)
  roots = r.roots + ([UOp(Ops.GROUP, dtypes.void, tuple(stored))] if stored else [])
  g, rep = import_uops(roots, "tensor", meta=meta, default_float=r.default_float)
  inputs = {_input_name(u): a for u, a in r.inputs.items()}
  inputs.update({_input_name(u): np.zeros(_created_shape(u, r.var_vals), storage_dtype(u.dtype)) for u in r.created})   # allocated by this realize: no contents before it
  inputs.update(variable_inputs(g, r.var_vals))
  expected = {f"out{k}": a for k, a in enumerate(r.outputs) if a is not None}
  expected.update({_input_name(b): r.final[b] for b in stored.values() if r.final.get(b) is not None})
  unread = [f"out{k}" for k, a in enumerate(r.outputs) if a is None]
  reasons = {f"out{k}": why for k, why in r.unread.items()}
  return GraphResult(f"r{r.index}.tensor", "tensor", g, rep, inputs, expected, unread=unread, unread_reasons=reasons, limitation=r.limitation)


def _created_shape(u, var_vals) -> tuple:
  """The shape of a BUFFER the realize allocated, as the tensor graph holds it: on n devices,
  its n shards (the spec's BUFFER on an n-tuple device, interop/tinygrad_multi.py)."""
  from tinygrad.uop.ops import sym_infer  # noqa: PLC0415 (tinygrad, an optional dependency)
  dims = tuple(sym_infer(d, var_vals) for d in u.shape)
  n = len(d) if isinstance(d := getattr(u.arg, "device", None), tuple) and dims else 1
  return (dims[0] * n, *dims[1:]) if n > 1 else dims


def _kernel_graph(r, c) -> GraphResult:
  g, rep = import_uops([c.body], "kernel", device=c.device, meta={"realize": r.index, "call": c.index}, default_float=r.default_float)
  names = _param_names(c.body, len(c.buffers))
  inputs = {names[k]: (a if a is not None else np.zeros(b.size, storage_dtype(b.dtype))) for k, (a, b) in enumerate(zip(c.before, c.buffers))
            if b is not None and not isinstance(a, Unreadable)}
  inputs.update(variable_inputs(g, c.var_vals))
  expected = {names[k]: a for k, a in enumerate(c.after) if isinstance(a, np.ndarray)}
  return GraphResult(f"r{r.index}.k{c.index}.kernel", "kernel", g, rep, inputs, expected, limitation=c.limitation)


def program_graph(r, c, k: GraphResult, prog) -> GraphResult:
  """The lowered program `prog` of call c: its inputs and expected values are its kernel's
  (k), in the program's PARAM dtypes, with its own variables' values."""
  g, rep = import_program(prog, device=c.device, meta={"realize": r.index, "call": c.index}, default_float=r.default_float)
  buffers = {name: a for name, a in k.inputs.items() if name not in c.var_vals}
  inputs = {**as_graph_dtypes(g, buffers), **variable_inputs(g, c.var_vals)}
  return GraphResult(f"r{r.index}.k{c.index}.program", "program", g, rep, inputs, as_graph_dtypes(g, k.expected), limitation=c.limitation)


def variable_inputs(graph, var_vals: dict) -> dict:
  """The values of the graph's symbolic variables (PARAMs named as a bound variable of the
  realize, reachable from its roots: the evaluator refuses an input it does not use)."""
  seen, todo, out = set(), list(graph.root_indices), {}
  while todo:
    i = todo.pop()
    if i in seen: continue
    seen.add(i)
    n = graph.nodes[i]
    todo.extend(n.src)
    if n.op == "PARAM" and isinstance(n.arg, dict) and n.arg.get("name") in var_vals and "device" not in n.arg:
      out[n.arg["name"]] = np.array(var_vals[n.arg["name"]], np_dtype(n.arg["dtype"]))
  return out


def as_graph_dtypes(graph, arrays: dict) -> dict:
  """arrays (keyed by input name) in the dtypes of the graph's BUFFERs/PARAMs of those names,
  the same bytes: a lowered program may hold an emulated dtype in an integer of its size
  (float16 on tinygrad's PYTHON device is uint16 storage, EMULATED_DTYPES), or of another
  size (EMULATED_DTYPES=long: each int64 a pair of int32, twice as many elements, flat as a
  kernel's buffers are), while the kernel's buffers and tinygrad's results are float16, int64."""
  want = {}
  for n in graph.nodes:   # (a dtype tinyspec has none for is the import's unmapped finding, not converted)
    if n.op in ("BUFFER", "PARAM") and isinstance(n.arg, dict) and isinstance(n.arg.get("dtype"), str) and canonical(n.arg["dtype"]):
      want.setdefault(input_name(n.op, n.arg), n.arg["dtype"])
  out = {}
  for k, a in arrays.items():
    dt = np_dtype(want[k]) if k in want else None
    if dt is None or a.dtype == dt or a.nbytes % dt.itemsize: out[k] = a
    elif a.dtype.itemsize == dt.itemsize: out[k] = a.view(dt)
    else: out[k] = np.ascontiguousarray(a).reshape(-1).view(dt)
  return out


def _input_name(u) -> str:
  """The input name of tinygrad's BUFFER or PARAM u (its ParamArg), as the import names it."""
  return input_name(u.op.name, {"name": getattr(u.arg, "name", None), "slot": u.arg.slot})


def _param_names(body, n: int) -> list[str]:
  """The reference evaluator's input name of each kernel PARAM slot 0..n-1."""
  names = {u.arg.slot: _input_name(u) for u in body.toposort() if u.op.name == "PARAM" and hasattr(u.arg, "slot")}
  return [names.get(k) or input_name("PARAM", {"slot": k}) for k in range(n)]
