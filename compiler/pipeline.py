"""The lowering pipeline of the Dialect document (spec/sources.yaml), one function per stage, each graph -> graph:

  callify -> rangeify -> optimize -> expand -> isel -> linearize -> memplan -> render

`lower` runs them all and keeps each stage's output as a graph (`Compiled.stages`):
every stage's graph is a tensor-level schedule (CALLs of kernel SINKs up to isel, of
PROGRAM(LINEAR) after linearize, of PROGRAM(LINEAR, SOURCE) after render) that the
validator accepts and the reference evaluator runs.
The optimize stage also holds the two schedule rewrites that depend on the device: a long
reduce with few outputs split over OpenCL work-groups (compiler/passes/split.py, before the
OptOps) and inputs packed in tile order for register-tiled kernels (compiler/passes/layout.py,
after them); both add kernels, and the stage's graph shows them.
Right after rangeify, compiler/passes/hazards.py points every read of what a kernel writes that
the graph does not order after the write at a snapshot copy kernel (user kernels: a
kernel-level input, the body of a CALL).
The input may be a tensor graph, a kernel (a SINK over PARAMs: one kernel whose PARAMs
are the inputs) or a linearized program (LINEAR: rendered as it is).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.graph import Graph
from tinyspec.uop import UOp, toposort
from tinyspec.rewrite import Trace, tracing, substitute
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.compiler.props import CompileError
from tinyspec.compiler.schedule import Kernel, Output, Schedule
from tinyspec.compiler.tables import render_tables
from tinyspec.compiler.passes.heuristics import numbers
from tinyspec.compiler.passes import callify as _callify, rangeify as _rangeify, optimize as _optimize, expand as _expand
from tinyspec.compiler.passes import layout as _layout, hazards as _hazards
from tinyspec.compiler.passes import split as _split
from tinyspec.compiler.passes import isel as _isel, linearize as _linearize, memplan as _memplan
from tinyspec.compiler import render as _render
from tinyspec.compiler.analysis.contract import longest_reduce

STAGES = ("input", "callify", "rangeify", "optimize", "expand", "isel", "linearize", "memplan", "render")


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
    from tinyspec.compiler.executor import Executable
    return Executable(self)

  def run(self, inputs=None, threads=None, cast=False):
    return self.executable().run(inputs, threads, cast)


def check_input(g: Graph, allow_untrusted: bool = False) -> str:
  """Validate; refuse untrusted ops. Returns the graph's level."""
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
  return res.level


def _map_kernels(s: Schedule, fn) -> Schedule:
  return Schedule([Kernel(fn(k), k.args, k.writes, k.name) for k in s.kernels], s.outputs, s.intermediates, dict(s.meta))


def _kernel_schedule(sink: UOp) -> Schedule:
  """A bare kernel: its PARAMs are the program's inputs and outputs (named by their own
  slots); inside, they are renumbered 0..n-1, the argument positions."""
  params = sorted({u for u in toposort(sink) if u.op == "PARAM"}, key=lambda p: p.arg["slot"])
  slots = [p.arg["slot"] for p in params]
  if len(set(slots)) != len(slots):
    raise CompileError("compile.form", f"two kernel PARAMs share a slot ({slots})")
  renum = {p: p.replace(arg={**p.arg, "slot": i}) for i, p in enumerate(params) if p.arg["slot"] != i}
  if renum: sink = substitute(sink, renum)
  writes = _rangeify._kernel_sink_slots(sink)
  return Schedule([Kernel(sink, params, writes, "user_kernel")], [Output("void")], set(), {})


def kernel_opts(opts, name: str):
  """The OptOps for kernel `name`: from a {name: opts} mapping (absent: the default), a
  list for every kernel, or None (the device's default: compiler/passes/heuristics.py)."""
  if isinstance(opts, dict): return opts.get(name)
  return list(opts) if isinstance(opts, (list, tuple)) else opts   # anything else: optimize refuses it


def lower(g, target: str = "c", opts=None, allow_untrusted: bool = False, keep_stages: bool = True, search=None, device=None,
          trace: Trace | None = None) -> Compiled:
  """Compile a Graph (or a UOp / list of root UOps) for target "c" or "opencl".
  opts: OptOps for every kernel (a list), per kernel name (a dict), or None: the device's
  default, which is `search(kernel sink, target, device)` when given (BEAM search: the
  public compile_graph in compiler/__init__.py passes it) and else, or when it gives
  None, the heuristics. device: the compiler.device.Device to compile for (default: the
  target's own, compiler/device.py; a table_device compiles for hardware not present).
  trace: a tinyspec.rewrite.Trace that counts the rules fired, per stage (--explain)."""
  with tracing(trace) as t:
    return _lower(g, target, opts, allow_untrusted, keep_stages, search, device, t)


def _lower(g, target: str, opts, allow_untrusted: bool, keep_stages: bool, search, device, trace: Trace) -> Compiled:
  if target not in _render.TARGETS: raise CompileError("compile.unsupported", f"unknown target {target!r} (c, opencl)")
  if isinstance(g, UOp): g = Graph.from_uops(g)
  elif isinstance(g, (list, tuple)): g = Graph.from_uops(*g)
  level = check_input(g, allow_untrusted)
  roots = g.root_uops()
  stages: dict = {"input": g}
  trace.stage = STAGES[1]
  def keep(name, make):   # make() builds the stage's graph(s), only when they are kept; the rules fired next count for the next stage
    if keep_stages: stages[name] = make()
    trace.stage = STAGES[STAGES.index(name) + 1] if name != STAGES[-1] else name

  contract: dict = {}    # kernels whose REG accumulators are all REDUCEs' -> elements a REDUCE sums, at most (render.yaml `contract`)
  dev = _target_device(target, device)
  if level == "program":
    root = roots[-1] if roots else None
    if root is not None and root.op == "PROGRAM": root = root.src[0]     # its SOURCE text is never used
    if root is None or root.op != "LINEAR": raise CompileError("compile.form", "a program-level graph is compiled from its LINEAR (or PROGRAM) root")
    lin = _optimize.program_axes(root)
    sched = _kernel_schedule(UOp("SINK", tuple(u for u in lin.src if u.op in ("STORE", "END"))))
    sched.kernels[0].sink = lin
    kernels_lin = [lin]
  else:
    if level == "kernel":
      if len(roots) != 1 or roots[0].op != "SINK": raise CompileError("compile.form", "a kernel-level graph is compiled from its SINK root")
      sched = _hazards.separate_reads(_kernel_schedule(roots[0]))
      keep("rangeify", lambda: sched.graph())
    else:
      roots = _callify.callify(roots)
      keep("callify", lambda: Graph.from_uops(*roots, level="tensor"))
      sched = _hazards.separate_reads(_rangeify.rangeify(roots, fuse_rows(target, dev)))   # user kernels CALLed: reads of what they write
      keep("rangeify", lambda: sched.graph())
    def choose(k):
      o = kernel_opts(opts, k.name)
      if o is None and search is not None: o = search(k.sink, target, dev)
      return o
    longest = max((longest_reduce(k.sink) for k in sched.kernels), default=1)   # a split sums in two kernels what one REDUCE sums
    if level != "kernel": sched = _split.split_reduces(sched, target, dev)    # OpenCL: a long reduce over every compute unit
    sched = _map_kernels(sched, lambda k: _optimize.optimize(k.sink, target, choose(k), dev))
    sched = _layout.pack(sched, target, dev)
    sched = _layout.pad_outputs(sched, target, dev)
    keep("optimize", lambda: sched.graph())
    longest = max([longest] + [longest_reduce(k.sink) for k in sched.kernels])
    contract = {k.name: longest for k in sched.kernels if not _has_reg(k.sink)}
    tree = target == "opencl" and numbers(dev).get("group_combine") == "tree"
    sched = _map_kernels(sched, lambda k: _expand.expand(k.sink, tree))
    keep("expand", lambda: sched.graph())
    sched = _map_kernels(sched, lambda k: _isel.isel(k.sink, target, dev.kind))
    keep("isel", lambda: sched.graph())
    kernels_lin = [_linearize.linearize(k.sink) for k in sched.kernels]
    lin_of = dict(zip(map(id, sched.kernels), kernels_lin))
    keep("linearize", lambda: sched.graph(body=lambda k: UOp("PROGRAM", (lin_of[id(k)],))))
  sched.meta["memory"] = _memplan.plan(sched)
  keep("memplan", lambda: sched.graph())
  sources = []
  stream = _stream_bytes(target, dev)
  for k, lin in zip(sched.kernels, kernels_lin):
    ks = _render.render(lin, k.name, target, allow_untrusted, noalias=_disjoint(k.args), kind=dev.kind, contract=contract.get(k.name, 0),
                        stream_bytes=stream)
    k.program = ks
    sources.append(ks)
  lang = "C" if target == "c" else "OpenCL C"
  prog_of = {id(k): UOp("PROGRAM", (lin, UOp("SOURCE", (), {"text": ks.source, "language": lang}))) for k, lin, ks in zip(sched.kernels, kernels_lin, sources)}
  keep("render", lambda: sched.graph(body=lambda k: prog_of[id(k)]) if level != "program" else Graph.from_uops(prog_of[id(sched.kernels[0])], level="program"))
  # the graph's own inputs are accepted even where the program no longer reads them (e.g. an
  # INDEX that is always out of range folds to zero): refimpl accepts them too
  return Compiled(target, sched, sources, stages, linear=kernels_lin, input_names=_input_names(sched) | _graph_input_names(g))


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
  from tinyspec.compiler.device import device
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
  """Names of the input graph's own storage (ops with `storage: true` in the tables)."""
  from tinyspec.compiler.executor import input_name
  ops = tables().ops
  return {input_name(u) for u in g.uops() if ops[u.op].storage is True and u.op in ("BUFFER", "PARAM")}


def _input_names(s: Schedule) -> set:
  """Names the program's inputs answer to: its storage (BUFFERs and input PARAMs)."""
  from tinyspec.compiler.executor import input_name
  seen = [a for k in s.kernels for a in k.args] + [o.storage for o in s.outputs if o.storage is not None]
  out = set()
  for u in seen:
    while u.op == "BUFFER_VIEW": u = u.src[0]
    if u.op in ("BUFFER", "PARAM") and u not in s.intermediates: out.add(input_name(u))
  return out
