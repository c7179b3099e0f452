"""The lowering pipeline of the Dialect document (spec/sources.yaml): STAGES, in order,

  callify -> rangeify -> optimize -> expand -> isel -> linearize -> memplan -> decide -> render

`lower` is a loop over them; each stage changes the Program (the input, the device, the
schedule of kernels, their LINEARs and sources) through its rule sets (compiler/passes/
steps.py: steps of kernel rules with their context, and schedule rules that replace one
kernel by others), and the trace counts every rule fired under the stage's name
(`tinyspec compile --explain`). Each stage's graph is kept (`Compiled.stages`): every one
is a tensor-level schedule (CALLs of kernel SINKs up to isel, of PROGRAM(LINEAR) after
linearize, of PROGRAM(LINEAR, SOURCE) after render) that the validator accepts and the
reference evaluator runs.
  callify    FUNCTION/CALL-of-TUPLE inlined (compiler/passes/callify.py)
  rangeify   the kernel split, tensors down to shape () (rangeify.py); then the reads of what a
             kernel writes get snapshots (snapshots.py)
  optimize   a long reduce split over OpenCL work-groups (split.py), each kernel's axis types
             and OptOps (optimize.py, heuristics.py, tiles.py), inputs packed in tile order and
             padded outputs (layout.py)
  expand     vectors, unrolls, group reductions, accumulators, loop ends (expand.py, accumulate.py)
  isel       decompositions, value loads, bounds gates (isel.py, gates.py)
  linearize  each kernel one instruction list (linearize.py)
  memplan    intermediates placed in one arena (memplan.py: a plan, no rewrite)
  decide     which accumulator updates fuse (and which only in a guarded variant), which
             outputs stream: tags on the LINEAR (decide.py; the render stage's graph shows them)
  render     C or OpenCL C, printed as decided (compiler/render)
The input may be a tensor graph, a kernel (a SINK over PARAMs: one kernel whose PARAMs
are the inputs: callify is skipped) or a linearized program (LINEAR: rendered as it is,
from linearize on).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable
from tinyspec.graph import Graph
from tinyspec.uop import UOp, toposort
from tinyspec.rewrite import Trace, tracing, substitute
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.dispatch import input_name
from tinyspec.validate import validate
from tinyspec.compiler.errors import CompileError, refusal
from tinyspec.props import DerivationError
from tinyspec.compiler.schedule import Kernel, Output, Schedule
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.passes.heuristics import numbers
from tinyspec.compiler.passes import callify as _callify_pass, rangeify as _rangeify_pass, optimize as _optimize_pass, expand as _expand_pass
from tinyspec.compiler.passes import layout as _layout, snapshots as _snapshots, split as _split
from tinyspec.compiler.passes import isel as _isel_pass, linearize as _linearize_pass, memplan as _memplan_pass, decide as _decide_pass
from tinyspec.compiler import render as _render
from tinyspec.compiler.analysis.contract import longest_reduce
from tinyspec.compiler.executor import Executable
from tinyspec.compiler.device import device

@dataclass
class Compiled:
  target: str
  schedule: Schedule
  sources: list                       # render.KernelSource per kernel, in execution order
  stages: dict = field(default_factory=dict)   # stage name -> Graph
  linear: list = field(default_factory=list)    # each kernel's LINEAR, in execution order
  input_names: set = field(default_factory=set)  # the input names the program's storage answers to

  def source(self) -> str:
    """The program: every kernel in one translation unit (what the runtimes build)."""
    return self.program_source()

  def program_source(self) -> str:
    return _render.assemble(self.sources, self.target)

  def executable(self):
    return Executable(self)

  def run(self, inputs=None, threads=None, cast=False):
    return self.executable().run(inputs, threads, cast)


def check_input(g: Graph, allow_untrusted: bool = False, target: str | None = None) -> str:
  """Validate; refuse untrusted ops and (given the target) dtypes the target has no type
  for. Returns the graph's level."""
  res = validate(g)
  if not res.ok:
    d = res.diagnostics[0]
    more = f" (and {len(res.diagnostics) - 1} more)" if len(res.diagnostics) > 1 else ""
    raise CompileError(d.rule, d.format() + more)
  T = tables()
  if not allow_untrusted:
    for i, n in enumerate(g.nodes):
      if T.ops[n.op].untrusted:
        raise CompileError("compile.untrusted", f"node {i} ({n.op}) is untrusted: refused without --allow-untrusted")
  if target is not None: _refuse_untyped(g, res.views, target)
  return res.level


def _refuse_untyped(g: Graph, views: list, target: str) -> None:
  """compile.unsupported for the first node whose dtype has no type on the target
  (spec/dtypes.yaml `c` / `cl` null: the float8 dtypes), before any pass meets it."""
  field = _render.DTYPE_FIELD[target]
  for i, (n, v) in enumerate(zip(g.nodes, views)):
    held = n.arg.get("dtype") if isinstance(n.arg, dict) else None   # a buffer's element dtype, a CAST's target
    for dt in (v.dtype, held):
      if isinstance(dt, str) and (d := DTYPES.get(dt)) is not None and d.cls != "void" and getattr(d, field) is None:
        raise CompileError("compile.unsupported", f"node {i} ({n.op}): dtype {dt} has no {target} type (spec/dtypes.yaml `{field}`): the compiler does not render it")


def _kernel_schedule(sink: UOp) -> Schedule:
  """A bare kernel: its PARAMs are the program's inputs and outputs (named by their own
  slots); inside, they are renumbered 0..n-1, the argument positions."""
  params = sorted({u for u in toposort(sink) if u.op == "PARAM"}, key=lambda p: p.arg["slot"])
  slots = [p.arg["slot"] for p in params]
  if len(set(slots)) != len(slots):
    raise CompileError("compile.form", f"two kernel PARAMs share a slot ({slots})")
  renum = {p: p.replace(arg={**p.arg, "slot": i}) for i, p in enumerate(params) if p.arg["slot"] != i}
  if renum: sink = substitute(sink, renum)
  writes = _rangeify_pass._kernel_sink_slots(sink)
  return Schedule([Kernel(sink, params, writes, "user_kernel")], [Output("void")], set(), {})


def kernel_opts(opts, name: str):
  """The OptOps for kernel `name`: from a {name: opts} mapping (absent: the default), a
  list for every kernel, or None (the device's default: compiler/passes/heuristics.py)."""
  if isinstance(opts, dict): return opts.get(name)
  return list(opts) if isinstance(opts, (list, tuple)) else opts   # anything else: optimize refuses it


@dataclass
class Program:
  """What the stages hand on: the input, the target and device, and what each stage made."""
  graph: Graph                 # the input graph
  level: str                   # its level: tensor, kernel or program
  target: str
  dev: object                  # the compiler.device.Device compiled for
  opts: object = None          # OptOps (see kernel_opts)
  search: object = None        # BEAM's search(sink, target, device), or None
  allow_untrusted: bool = False
  roots: list = field(default_factory=list)      # the tensor graph's roots (callify)
  sched: Schedule | None = None                  # the kernels (rangeify on)
  linear: list = field(default_factory=list)     # each kernel's LINEAR (linearize on)
  longest: int = 1             # the most elements one REDUCE sums, before any split (render.yaml `contract`)
  contract: dict = field(default_factory=dict)   # kernel name -> that bound, for kernels whose REG accumulators are all REDUCEs'
  guards: list = field(default_factory=list)     # per kernel: the updates its fused variant's Guard checks (decide)
  sources: list = field(default_factory=list)    # render.KernelSource per kernel

  def choose(self, k: Kernel):
    """Kernel k's OptOps: given, or BEAM's, or None (the heuristics)."""
    o = kernel_opts(self.opts, k.name)
    if o is None and self.search is not None: o = self.search(k.sink, self.target, self.dev)
    return o

  def map_kernels(self, fn) -> None:
    s = self.sched
    self.sched = Schedule([Kernel(fn(k), k.args, k.writes, k.name) for k in s.kernels], s.outputs, s.intermediates, dict(s.meta))


@dataclass(frozen=True)
class Stage:
  """A named stage: `run` changes the Program (its rewrites are rule sets, counted in the
  trace under the stage's name), for input graphs of `levels`; `graph` is the stage's
  graph, kept in Compiled.stages (None: not kept for this input)."""
  name: str
  run: Callable[[Program], None]
  graph: Callable[[Program], Graph | None]
  levels: tuple = ("tensor", "kernel", "program")


def _callify(p: Program) -> None:
  p.roots = _callify_pass.callify(p.roots)


def _rangeify(p: Program) -> None:
  if p.level == "kernel":
    if len(p.roots) != 1 or p.roots[0].op != "SINK": raise CompileError("compile.form", "a kernel-level graph is compiled from its SINK root")
    p.sched = _kernel_schedule(p.roots[0])
  else: p.sched = _rangeify_pass.rangeify(p.roots, fuse_rows(p.target, p.dev))
  p.sched = _snapshots.separate(p.sched)   # user kernels (a kernel-level graph, CALLed ones): reads of what they write


def _optimize(p: Program) -> None:
  p.longest = max((longest_reduce(k.sink) for k in p.sched.kernels), default=1)   # a split sums in two kernels what one REDUCE sums
  if p.level != "kernel": p.sched = _split.split_reduces(p.sched, p.target, p.dev)    # OpenCL: a long reduce over every compute unit
  p.map_kernels(lambda k: _optimize_pass.optimize(k.sink, p.target, p.choose(k), p.dev))
  p.sched = _layout.pad_outputs(_layout.pack(p.sched, p.target, p.dev), p.target, p.dev)
  p.longest = max([p.longest] + [longest_reduce(k.sink) for k in p.sched.kernels])
  p.contract = {k.name: p.longest for k in p.sched.kernels if not _has_reg(k.sink)}


def _expand(p: Program) -> None:
  tree = p.target == "opencl" and numbers(p.dev).get("group_combine") == "tree"
  p.map_kernels(lambda k: _expand_pass.expand(k.sink, tree))


def _isel(p: Program) -> None:
  p.map_kernels(lambda k: _isel_pass.isel(k.sink, p.target, p.dev.kind))


def _linearize(p: Program) -> None:
  if p.level != "program":
    p.linear = [_linearize_pass.linearize(k.sink) for k in p.sched.kernels]
    return
  root = p.roots[-1] if p.roots else None
  if root is not None and root.op == "PROGRAM": root = root.src[0]     # its SOURCE text is never used
  if root is None or root.op != "LINEAR": raise CompileError("compile.form", "a program-level graph is compiled from its LINEAR (or PROGRAM) root")
  lin = _optimize_pass.program_axes(root)
  p.sched = _kernel_schedule(UOp("SINK", tuple(u for u in lin.src if u.op in ("STORE", "END"))))
  p.sched.kernels[0].sink = lin
  p.linear = [lin]


def _memplan(p: Program) -> None:
  p.sched.meta["memory"] = _memplan_pass.plan(p.sched)


def _decide(p: Program) -> None:
  stream = _stream_bytes(p.target, p.dev)
  decided = [_decide_pass.decide(lin, p.target, p.dev.kind, p.contract.get(k.name, 0), _disjoint(k.args), stream) for k, lin in zip(p.sched.kernels, p.linear)]
  p.linear = [lin for lin, _ in decided]
  p.guards = [guard for _, guard in decided]
  if p.level == "program": p.sched.kernels[0].sink = p.linear[0]


def _render_stage(p: Program) -> None:
  for k, lin, guard in zip(p.sched.kernels, p.linear, p.guards):
    k.program = _render.render(lin, k.name, p.target, p.allow_untrusted, noalias=_disjoint(k.args), kind=p.dev.kind, guard=tuple(guard))
    p.sources.append(k.program)


def _programs(p: Program) -> Graph:
  """The schedule calling each kernel's PROGRAM(LINEAR, SOURCE); a program-level input: that PROGRAM."""
  lang = "C" if p.target == "c" else "OpenCL C"
  prog_of = {id(k): UOp("PROGRAM", (lin, UOp("SOURCE", (), {"text": ks.source, "language": lang})))
             for k, lin, ks in zip(p.sched.kernels, p.linear, p.sources)}
  if p.level == "program": return Graph.from_uops(prog_of[id(p.sched.kernels[0])], level="program")
  return p.sched.graph(body=lambda k: prog_of[id(k)])


def _linears(p: Program) -> Graph | None:
  if p.level == "program": return None
  lin_of = dict(zip(map(id, p.sched.kernels), p.linear))
  return p.sched.graph(body=lambda k: UOp("PROGRAM", (lin_of[id(k)],)))


STAGES = (
  Stage("callify", _callify, lambda p: Graph.from_uops(*p.roots, level="tensor"), ("tensor",)),
  Stage("rangeify", _rangeify, lambda p: p.sched.graph(), ("tensor", "kernel")),
  Stage("optimize", _optimize, lambda p: p.sched.graph(), ("tensor", "kernel")),
  Stage("expand", _expand, lambda p: p.sched.graph(), ("tensor", "kernel")),
  Stage("isel", _isel, lambda p: p.sched.graph(), ("tensor", "kernel")),
  Stage("linearize", _linearize, _linears),
  Stage("memplan", _memplan, lambda p: p.sched.graph()),
  Stage("decide", _decide, lambda p: None),     # its tags are in the render stage's graph
  Stage("render", _render_stage, _programs),
)


def lower(g, target: str = "c", opts=None, allow_untrusted: bool = False, keep_stages: bool = True, search=None, device=None,
          trace: Trace | None = None) -> Compiled:
  """Compile a Graph (or a UOp / list of root UOps) for target "c" or "opencl": the STAGES
  in order, each stage's graph kept in Compiled.stages (keep_stages).
  opts: OptOps for every kernel (a list), per kernel name (a dict), or None: the device's
  default, which is `search(kernel sink, target, device)` when given (BEAM search: the
  public compile_graph in compiler/__init__.py passes it) and else, or when it gives
  None, the heuristics. device: the compiler.device.Device to compile for (default: the
  target's own, compiler/device.py; a table_device compiles for hardware not present).
  trace: a tinyspec.rewrite.Trace that counts the rules fired, per stage (--explain)."""
  if target not in _render.TARGETS: raise CompileError("compile.unsupported", f"unknown target {target!r} (c, opencl)")
  if isinstance(g, UOp): g = Graph.from_uops(g)
  elif isinstance(g, (list, tuple)): g = Graph.from_uops(*g)
  level = check_input(g, allow_untrusted, target)
  p = Program(g, level, target, _target_device(target, device), opts, search, allow_untrusted, roots=g.root_uops())
  stages: dict = {"input": g}
  with tracing(trace) as t:
    for stage in STAGES:
      if level not in stage.levels: continue
      t.stage = stage.name
      try: stage.run(p)
      except DerivationError as e: raise refusal(e) from None
      if keep_stages and (kept := stage.graph(p)) is not None: stages[stage.name] = kept
  # the graph's own inputs are accepted even where the program no longer reads them (e.g. an
  # INDEX that is always out of range folds to zero): refimpl accepts them too
  return Compiled(target, p.sched, p.sources, stages, linear=p.linear, input_names=_input_names(p.sched) | _graph_input_names(g))


def _stream_bytes(target: str, dev) -> int | None:
  """The smallest output the renderer writes with streaming stores (render.yaml
  `streaming`): the host's last-level cache, else the table's size; None: never."""
  S = render_tables().get("streaming", {}).get(target)
  if S is None: return None
  return int(dev.cache_bytes or S["min_bytes"])


def fuse_rows(target: str, dev) -> int | None:
  """The longest row whose reductions stay in their consumers' kernel (render.yaml
  heuristics `fuse_rows`: rows per work item; GPUs: a work-group of `group_size` items
  reads the row, so a row of at most group_size x that), or None (no fusion)."""
  H = numbers(dev)
  per_item = H.get("fuse_rows")
  if not per_item: return None
  width = min(int(H["group_size"]), dev.max_local or int(H["group_size"])) if target == "opencl" and H.get("group_size") else 1
  return int(per_item) * width


def _has_reg(sink: UOp) -> bool:
  """Does the kernel hold REG buffers of its own (a user kernel's accumulators)?"""
  return any(u.op == "BUFFER" and u.arg.get("addrspace") == "REG" for u in toposort(sink))


def _target_device(target: str, dev):
  if dev is None: return device(target)
  if dev.target != target: raise CompileError("compile.unsupported", f"device {dev.name!r} is a {dev.target} device, not {target}")
  return dev


def _disjoint(args) -> bool:
  """Do the kernel's arguments occupy pairwise disjoint memory? Distinct storages do
  (inputs are separate allocations, intermediates live in the arena at places the memory
  plan keeps apart while both live); views of one base may overlap, and a storage passed
  twice aliases itself."""
  bases = []
  for a in args:
    while a.op == "BUFFER_VIEW": a = a.src[0]
    bases.append(a)
  return len(set(bases)) == len(bases)


def _graph_input_names(g: Graph) -> set:
  """Names of the input graph's own storage (the tables' input_ops: BUFFER, PARAM)."""
  return {input_name(u.op, u.arg) for u in g.uops() if u.op in tables().input_ops}


def _input_names(s: Schedule) -> set:
  """Names the program's inputs answer to: its storage (BUFFERs and input PARAMs)."""
  seen = [a for k in s.kernels for a in k.args] + [o.storage for o in s.outputs if o.storage is not None]
  out = set()
  for u in seen:
    while u.op == "BUFFER_VIEW": u = u.src[0]
    if u.op in tables().input_ops and u not in s.intermediates: out.add(input_name(u.op, u.arg))
  return out
