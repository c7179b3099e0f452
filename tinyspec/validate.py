"""The validator: checks a graph against the tables and derives every node's properties.

One pass over the nodes in file order (they are topologically sorted by construction),
so the cost is linear in the graph and no recursion is involved. For each node:
  op known -> sources are earlier nodes -> arity -> arg schema -> source slots (kind,
  dtype) -> level -> op checks -> derived properties -> declared dtype/shape.
A node that breaks a rule is reported and then treated as unknown, so its consumers are
not blamed for it: every independent error is reported once.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.tables import tables as _tables, Tables, PROPS
from tinyspec.rules import RuleFail
from tinyspec.diagnostics import Diagnostic, EXIT_OK, EXIT_INVALID
from tinyspec.dtypes import canonical
from tinyspec.frozen import key as _key
from tinyspec.graph import Graph, load_file

LEVELS = ("tensor", "kernel", "program")
_BIT = {"tensor": 1, "kernel": 2, "program": 4}
_FIRST_LEVEL = [next((lv for lv in LEVELS if c & _BIT[lv]), "tensor") for c in range(8)]


class View:
  """A node as the rules see it: its inputs and its derived properties."""
  __slots__ = ("index", "op", "arg", "src", "dtype", "shape", "device", "addrspace", "min_max", "axis", "value")

  def __init__(self, index, op, arg, src):
    self.index, self.op, self.arg, self.src = index, op, arg, src
    self.dtype = self.shape = self.device = self.addrspace = self.min_max = self.axis = self.value = None

  @property
  def slot(self): return self.arg["slot"]

  def props(self) -> dict:
    return {p: getattr(self, p) for p in PROPS}

  def __repr__(self):
    return f"<node {self.index} {self.op} {self.dtype} {self.shape}>"


@dataclass
class ValidationResult:
  graph: Graph | None
  diagnostics: list[Diagnostic]
  views: list = field(default_factory=list)
  level: str | None = None

  @property
  def ok(self) -> bool: return not self.diagnostics

  @property
  def exit_code(self) -> int:
    if not self.diagnostics: return EXIT_OK
    return max(d.exit_code for d in self.diagnostics)

  def rules(self) -> set[str]: return {d.rule for d in self.diagnostics}


def detect_level(g: Graph, T: Tables) -> str:
  """The level of a graph with none declared: program if its root is LINEAR/PROGRAM,
  kernel if it uses kernel-only ops outside CALLed kernels, else tensor."""
  last = g.nodes[g.root_indices[-1]] if g.nodes and 0 <= g.root_indices[-1] < len(g.nodes) else None
  if last is not None and last.op in ("LINEAR", "PROGRAM"): return "program"
  kernel_only = {n for n, o in T.ops.items() if "tensor" not in o.levels}
  if not any(n.op in kernel_only for n in g.nodes): return "tensor"
  calls_kernel = any(n.op == "CALL" and n.src and 0 <= n.src[0] < len(g.nodes) and g.nodes[n.src[0]].op == "SINK" for n in g.nodes)
  return "tensor" if calls_kernel else "kernel"


def _contexts(g: Graph, top: str, T: Tables) -> list[int]:
  """Bitmask of the levels each node is used at: kernel inside a CALLed SINK, program
  inside LINEAR/PROGRAM, else the graph's level. One reverse pass."""
  n = len(g.nodes)
  ctx = [0] * n
  for r in g.root_indices:
    if 0 <= r < n: ctx[r] |= _BIT[top]
  for i in range(n - 1, -1, -1):
    node = g.nodes[i]
    c = ctx[i] or _BIT[top]
    ctx[i] = c
    for k, j in enumerate(node.src):
      if not (0 <= j < i): continue
      if node.op in ("LINEAR", "PROGRAM"): cj = _BIT["program"]
      elif node.op == "CALL" and k == 0 and g.nodes[j].op == "SINK": cj = _BIT["kernel"]
      else: cj = c
      ctx[j] |= cj
  return ctx


def _skeleton(v):
  """The arg with every number replaced by its kind and sign: for skeleton-safe schemas
  (see tables._skeleton_safe) validity depends on nothing else."""
  t = type(v)
  if t is str or v is None: return v
  if t is int: return _NEG if v < 0 else _POS
  if t is float: return _FLT
  if v is None or isinstance(v, str): return v
  if isinstance(v, bool): return ("b", v)
  if isinstance(v, int): return ("i", v < 0)
  if isinstance(v, float): return ("f",)
  if isinstance(v, dict): return ("d",) + tuple(sorted((k, _skeleton(x)) for k, x in v.items()))
  if isinstance(v, tuple): return ("l",) + tuple(_skeleton(x) for x in v)
  return ("o", repr(v))


_NEG, _POS, _FLT = ("i", True), ("i", False), ("f",)


class _ArgCache:
  """jsonschema is thorough but slow; an arg is checked once per distinct value, or per
  distinct skeleton where the op's schema allows it (CONST values, BUFFER slots...)."""
  def __init__(self): self.seen: dict = {}

  def errors(self, op, arg) -> str | None:
    if arg is None or type(arg) is int: k = (op.name, arg, type(arg))   # fast path for the common args
    else:
      try: k = (op.name, _skeleton(arg) if op.skeleton_safe else _key(arg))
      except RecursionError: return "the arg is nested too deeply"
    if k in self.seen: return self.seen[k]
    from tinyspec.frozen import thaw
    err = None
    try:
      errs = list(op.arg_validator.iter_errors(thaw(arg)))
    except RecursionError:
      errs, err = [], "the arg is nested too deeply"
    if errs:
      import jsonschema
      e = jsonschema.exceptions.best_match(errs)
      path = "".join(f"[{p!r}]" for p in e.absolute_path)
      err = f"arg{path}: {e.message}"[:300]
    self.seen[k] = err
    return err


_arg_cache = _ArgCache()


def validate(graph: Graph, level: str = "auto", tables: Tables | None = None, file: str = "<graph>") -> ValidationResult:
  """Check every node; return diagnostics and each valid node's View."""
  # The pass allocates ~10 objects per node that all stay alive; the cyclic GC would
  # rescan them again and again (quadratic in practice), and nothing here makes cycles.
  import gc
  was = gc.isenabled(); gc.disable()
  try: return _validate(graph, level, tables, file)
  finally:
    if was: gc.enable()


def _slot_plan(od):
  """Per source position: (slot name, kind, allowed dtypes or None, same-as slot or None)."""
  plan = getattr(od, "_plan", None)
  if plan is None:
    plan = []
    for s in od.slots:
      plan.append((s.name, s.kind, s.allowed(), s.dtype["same"] if isinstance(s.dtype, dict) else None))
    od._plan = plan
  return plan


def _validate(graph: Graph, level: str, tables: Tables | None, file: str) -> ValidationResult:
  T = tables or _tables()
  diags: list[Diagnostic] = []
  nodes = graph.nodes
  top = level if level in LEVELS else (graph.level or detect_level(graph, T))
  ctx = _contexts(graph, top, T)
  views: list[View | None] = [None] * len(nodes)
  arg_cache = _arg_cache if tables is None else _ArgCache()
  ops = T.ops
  od_masks: dict[str, int] = {}

  def report(i, op, rule, msg):
    diags.append(Diagnostic(file, i, op, rule, msg))

  for r in graph.root_indices:
    if not (0 <= r < len(nodes)): report(None, None, "graph.src", f"root {r} is not a node index")

  for i, node in enumerate(nodes):
    name = node.op
    if name == "?": continue   # already reported by the file-schema check
    od = ops.get(name)
    if od is None:
      report(i, name, "graph.unknown_op", f"unknown op {name!r}"); continue
    srcs_i = node.src
    bad = [j for j in srcs_i if not (0 <= j < i)]
    if bad:
      why = "itself (a cycle)" if i in bad else ("a later node (sources must come first)" if any(j > i for j in bad) and all(j < len(nodes) for j in bad) else "no node")
      report(i, name, "graph.src", f"src {bad[0]} refers to {why}"); continue
    ns = len(srcs_i)
    if ns < od.min_src or ns > od.max_src:
      report(i, name, "graph.arity", f"{name} takes {od.arity_text()}, got {ns} source{'s' if ns != 1 else ''}"); continue
    arg = node.arg
    err = arg_cache.errors(od, arg)
    if err is not None:
      report(i, name, "arg.schema", err); continue
    src = [views[j] for j in srcs_i]
    if None in src: continue   # a source is already broken: do not cascade
    # level
    c = ctx[i]
    mask = od_masks.get(name)
    if mask is None: mask = od_masks[name] = sum(_BIT[lv] for lv in od.levels)
    if c & ~mask:
      wrong = next(lv for lv in LEVELS if c & ~mask & _BIT[lv])
      report(i, name, "level.op", f"{name} may appear at level {', '.join(od.levels)}, not in a {wrong} graph"); continue
    lvl = _FIRST_LEVEL[c]
    # source slots
    ok = True
    slots_by_name = {}
    plan = _slot_plan(od)
    nplan = len(plan)
    for k, s in enumerate(src):
      sname, kind, allowed, same = plan[k] if k < nplan else plan[-1]
      if sname not in slots_by_name: slots_by_name[sname] = s
      if kind == "any": continue
      if kind == "value" or kind == "shape":
        if s.dtype == "void" or isinstance(s.dtype, tuple):
          report(i, name, "slot.kind", f"source {k} ({sname}) must be a value, node {s.index} ({s.op}) is {'void' if s.dtype == 'void' else 'a tuple'}"); ok = False; continue
      elif kind == "range":
        if s.op != "RANGE":
          report(i, name, "slot.kind", f"source {k} ({sname}) must be a RANGE, not {s.op}"); ok = False; continue
      elif kind == "void":
        if s.dtype != "void":
          report(i, name, "slot.kind", f"source {k} ({sname}) must be a side effect (void), not {s.op} of dtype {s.dtype}"); ok = False; continue
      if kind == "shape" and (s.dtype != "index" or len(s.shape) > 1):
        report(i, name, "shape.operand", f"source {k} ({sname}) must be an index shape operand, node {s.index} ({s.op}) is {s.dtype} with shape {s.shape}"); ok = False; continue
      if allowed is not None and s.dtype not in allowed:
        report(i, name, "dtype.allowed", f"source {k} ({sname}) has dtype {s.dtype}, {name} takes {od.slot_for(k).dtype}"); ok = False; continue
      if same is not None:
        other = slots_by_name.get(same)
        if other is not None and other.dtype != s.dtype:
          report(i, name, "dtype.match", f"source {k} ({sname}) has dtype {s.dtype}, it must match {same} ({other.dtype})"); ok = False
    if not ok: continue
    v = View(i, name, arg, src)
    for chk in od.checks:
      try:
        good = chk.fn(src, arg, name, lvl, v, None, None, None, None, None)
      except RuleFail as e:
        report(i, name, e.rule, e.msg); ok = False; continue
      except Exception as e:  # a check that cannot even be evaluated counts as broken
        report(i, name, chk.rule, f"{chk.msg} ({type(e).__name__}: {e})"[:300]); ok = False; continue
      if not good:
        report(i, name, chk.rule, chk.msg); ok = False
    if not ok: continue
    try:
      f_dt, f_sh, f_dev, f_as, f_mm, f_ax = od.derive
      v.dtype = dt = f_dt(src, arg, name, lvl, v, None, None, None, None, None)
      v.shape = sh = f_sh(src, arg, name, lvl, v, dt, None, None, None, None)
      v.device = dev = f_dev(src, arg, name, lvl, v, dt, sh, None, None, None)
      v.addrspace = asp = f_as(src, arg, name, lvl, v, dt, sh, dev, None, None)
      v.min_max = mm = f_mm(src, arg, name, lvl, v, dt, sh, dev, asp, None)
      v.axis = f_ax(src, arg, name, lvl, v, dt, sh, dev, asp, mm)
    except RuleFail as e:
      report(i, name, e.rule, e.msg); continue
    except Exception as e:
      report(i, name, "internal.error", f"deriving properties failed ({type(e).__name__}: {e}); this is a bug in the tables"[:300]); continue
    if dt == "index":   # constant folding of shape operands
      if name == "CONST": v.value = arg["value"]
      elif name == "VCONST": v.value = tuple(arg["values"])
      elif name == "STACK" and all(s.value is not None and not isinstance(s.value, tuple) for s in src): v.value = tuple(s.value for s in src)
    if node.dtype is not None:
      want = node.dtype if isinstance(node.dtype, tuple) else canonical(node.dtype)
      if want != dt:
        report(i, name, "declared.dtype", f"declared dtype {node.dtype} but derived {dt}"); continue
    if node.shape is not None and tuple(node.shape) != tuple(sh):
      report(i, name, "declared.shape", f"declared shape {tuple(node.shape)} but derived {sh}"); continue
    views[i] = v
  return ValidationResult(graph, diags, views, top)


def validate_file(path, level: str = "auto", tables: Tables | None = None) -> ValidationResult:
  g, diags = load_file(path)
  if g is None or diags:
    return ValidationResult(g, diags, [], None)
  return validate(g, level, tables, file=str(path))


def derive_uop(u) -> None:
  """Fill `_props` of u and everything below it; raises ValueError if the graph is invalid."""
  g = Graph.from_uops(u)
  res = validate(g)
  if not res.ok:
    raise ValueError("invalid graph:\n" + "\n".join(d.format() for d in res.diagnostics[:20]))
  for uu, v in zip(g.uops(), res.views): uu._props = v
