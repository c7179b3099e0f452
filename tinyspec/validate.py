"""The validator: checks a graph against the tables and derives every node's properties.

One pass over the nodes in file order (they are topologically sorted by construction),
so the cost is linear in the graph and no recursion is involved. For each node:
  op known -> sources are earlier nodes -> arity -> arg schema -> level (these need the
  node alone) -> source slots (kind, dtype) -> op checks -> derived properties ->
  declared dtype/shape (these read the sources' properties).
A node that breaks a rule is reported and then treated as unknown, so its consumers are
not blamed for it: every independent error is reported once.

Speed (bench/bench_validate.py): the per-op work is prepared once per Tables (_OpInfo:
a generated slot predicate, the op checks and-ed into one function, the six property
rules compiled into one), so a node costs a few dict lookups and two or three calls; the
detailed diagnostics are only computed for nodes that fail the quick yes.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import NamedTuple
from tinyspec.tables import tables as _tables, Tables, PROPS
from tinyspec.rules import RuleFail
from tinyspec.diagnostics import Diagnostic, EXIT_OK, EXIT_INVALID
from tinyspec.dtypes import canonical
from tinyspec.frozen import key as _key, FrozenDict
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

  def untrusted(self, tables: Tables | None = None) -> list[int]:
    """Nodes whose op the tables mark `untrusted` (CUSTOM, INS...): valid graph data, but
    opaque code that evaluators and compilers refuse unless explicitly allowed."""
    if self.graph is None: return []
    ops = (tables or _tables()).ops
    return [i for i, n in enumerate(self.graph.nodes) if n.op in ops and ops[n.op].untrusted]


def detect_level(g: Graph, T: Tables, present: set | None = None) -> str:
  """The level of a graph with none declared: program if its root is LINEAR/PROGRAM,
  kernel if it uses kernel-only ops outside CALLed kernels, else tensor.
  `present` is the set of ops in the graph, if the caller has it."""
  last = g.nodes[g.root_indices[-1]] if g.nodes and 0 <= g.root_indices[-1] < len(g.nodes) else None
  if last is not None and last.op in ("LINEAR", "PROGRAM"): return "program"
  if present is None: present = {n.op for n in g.nodes}
  if not any(T.ops[n].levels and "tensor" not in T.ops[n].levels for n in present if n in T.ops): return "tensor"
  calls_kernel = "CALL" in present and any(n.op == "CALL" and n.src and 0 <= n.src[0] < len(g.nodes) and g.nodes[n.src[0]].op == "SINK" for n in g.nodes)
  return "tensor" if calls_kernel else "kernel"


def _contexts(g: Graph, top: str, present: set) -> list[int] | None:
  """Bitmask of the levels each node is used at: kernel inside a CALLed SINK, program
  inside LINEAR/PROGRAM, else the graph's level. One reverse pass; None when no node
  opens another level (every node is at `top`)."""
  if not present & {"LINEAR", "PROGRAM", "CALL"}: return None
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
  (see tables._skeleton_safe) validity depends on nothing else. Object keys keep their
  order (an arg written in another key order is just another cache entry)."""
  t = type(v)
  if t is str or v is None: return v
  if t is int: return _NEG if v < 0 else _POS
  if t is float: return _FLT
  if t is bool: return _TRUE if v else _FALSE
  if t is FrozenDict or t is dict: return ("d",) + tuple([(k, x if type(x) is str else _FLT if type(x) is float else _skeleton(x)) for k, x in v.items()])
  if t is tuple or t is list: return ("l",) + tuple([_NEG if type(x) is int and x < 0 else _POS if type(x) is int else _skeleton(x) for x in v])
  return ("o", repr(v))


_NEG, _POS, _FLT, _TRUE, _FALSE = ("i", True), ("i", False), ("f",), ("b", True), ("b", False)


class _ArgCache:
  """jsonschema is thorough but slow; an arg is checked once per distinct value, or per
  distinct skeleton where the op's schema allows it (CONST values, BUFFER slots...)."""
  LIMIT = 200_000    # distinct args remembered (a file of huge distinct args must not grow it forever)

  def __init__(self): self.seen: dict = {}

  def errors(self, op, arg) -> str | None:
    t = type(arg)
    if arg is None or t is int or t is str: k = (op.name, arg, t)   # fast path for the common args
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
    if len(self.seen) >= self.LIMIT: self.seen.clear()
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


_ANY, _VALUE, _SHAPE, _RANGE, _VOID = "any", "value", "shape", "range", "void"


def _slots_pred(od):
  """A function src -> bool: the quick yes of the slot checks, generated once per op from
  its slots (one call per node instead of a loop over slot descriptions). On a no,
  _slot_errors says what is wrong. Slots are positional and only the last may be
  variadic, so slot k's first source sits at position k."""
  pred = getattr(od, "_slots_pred", None)
  if pred is not None: return pred
  env: dict = {"__builtins__": {}, "all": all, "len": len, "str": str, "type": type}
  names = [s.name for s in od.slots]
  conds = []
  for k, (sname, kind, allowed, same) in enumerate(_slot_plan(od)):
    var = od.slots[k].variadic
    x = "x" if var else f"src[{k}]"
    c = []
    if kind == _RANGE: c.append(f"{x}.op == 'RANGE'")
    elif kind == _VOID: c.append(f"{x}.dtype == 'void'")
    elif kind == _SHAPE: c.append(f"{x}.dtype == 'index' and len({x}.shape) <= 1")
    elif kind != _ANY and allowed is None: c.append(f"type({x}.dtype) is str and {x}.dtype != 'void'")
    if kind != _ANY and allowed is not None:
      env[f"A{k}"] = allowed; c.append(f"{x}.dtype in A{k}")   # dtype names: excludes void and tuples
    if kind != _ANY and same is not None:
      j = names.index(same)
      c.append(f"(len(src) <= {j} or {x}.dtype == src[{j}].dtype)")
    if not c: continue
    body = " and ".join(f"({t})" for t in c)
    conds.append(f"all({body} for x in src[{k}:])" if var else f"(len(src) <= {k} or ({body}))")
  code = "lambda src: " + (" and ".join(conds) if conds else "True")
  od._slots_pred = pred = eval(code, env)   # noqa: S307 -- generated from the slot table above
  return pred


def _slot_errors(od, name, src):
  """(rule, message) for every source that does not fit its slot."""
  out = []
  by_name = {}
  plan = _slot_plan(od)
  for k, s in enumerate(src):
    sname, kind, allowed, same = plan[k] if k < len(plan) else plan[-1]
    by_name.setdefault(sname, s)
    if kind == _ANY: continue
    if kind in (_VALUE, _SHAPE) and (s.dtype == "void" or isinstance(s.dtype, tuple)):
      out.append(("slot.kind", f"source {k} ({sname}) must be a value, node {s.index} ({s.op}) is {'void' if s.dtype == 'void' else 'a tuple'}")); continue
    if kind == _RANGE and s.op != "RANGE":
      out.append(("slot.kind", f"source {k} ({sname}) must be a RANGE, not {s.op}")); continue
    if kind == _VOID and s.dtype != "void":
      out.append(("slot.kind", f"source {k} ({sname}) must be a side effect (void), not {s.op} of dtype {s.dtype}")); continue
    if kind == _SHAPE and (s.dtype != "index" or len(s.shape) > 1):
      out.append(("shape.operand", f"source {k} ({sname}) must be an index shape operand, node {s.index} ({s.op}) is {s.dtype} with shape {s.shape}")); continue
    if allowed is not None and s.dtype not in allowed:
      out.append(("dtype.allowed", f"source {k} ({sname}) has dtype {s.dtype}, {name} takes {od.slot_for(k).dtype}")); continue
    if same is not None:
      other = by_name.get(same)
      if other is not None and other.dtype != s.dtype:
        out.append(("dtype.match", f"source {k} ({sname}) has dtype {s.dtype}, it must match {same} ({other.dtype})"))
  return out


class _OpInfo(NamedTuple):
  """What the main loop needs of one op, gathered once per Tables (a tuple, so the loop
  unpacks it in one step; the names serve other readers such as the front end)."""
  od: object            # the Op
  min_src: int
  max_src: float
  off_levels: int       # level bits where the op may not appear
  slots_ok: object      # src -> bool, the quick yes of the slot checks
  checks: list
  checks_all: object    # all checks as one function (None without checks)
  derive: object        # the six property rules as one function
  null_arg_err: str | None   # the arg.schema error of a null arg, or None


def _op_info(od, arg_errors) -> _OpInfo:
  off_levels = 7 & ~sum(_BIT[lv] for lv in od.levels if lv in _BIT)
  return _OpInfo(od, od.min_src, od.max_src, off_levels, _slots_pred(od), od.checks, od.checks_all, od.derive_all, arg_errors(od, None))


def _op_infos(T: Tables, arg_cache) -> dict:
  infos = T.__dict__.get("_validate_infos")
  if infos is None or infos[0] is not arg_cache:
    infos = (arg_cache, {name: _op_info(od, arg_cache.errors) for name, od in T.ops.items()})
    T._validate_infos = infos
  return infos[1]


def _validate(graph: Graph, level: str, tables: Tables | None, file: str) -> ValidationResult:
  T = tables or _tables()
  diags: list[Diagnostic] = []
  nodes = graph.nodes
  present = {nd.op for nd in nodes}
  top = level if level in LEVELS else (graph.level or detect_level(graph, T, present))
  ctx = _contexts(graph, top, present)
  top_bit = _BIT[top]
  views: list[View | None] = [None] * len(nodes)
  vget = views.__getitem__
  arg_cache = _arg_cache if tables is None else T.__dict__.setdefault("_arg_cache", _ArgCache())
  arg_errors = arg_cache.errors
  infos = _op_infos(T, arg_cache)
  new_view = View.__new__

  def report(i, op, rule, msg):
    diags.append(Diagnostic(file, i, op, rule, msg))

  for r in graph.root_indices:
    if not (0 <= r < len(nodes)): report(None, None, "graph.src", f"root {r} is not a node index")

  for i, node in enumerate(nodes):
    name = node.op
    info = infos.get(name)
    if info is None:
      if name != "?": report(i, name, "graph.unknown_op", f"unknown op {name!r}"[:300])   # "?": already a file.schema error
      continue
    od, min_src, max_src, off_levels, slots_ok, checks, checks_all, derive, null_arg_err = info
    srcs_i = node.src
    if srcs_i and (min(srcs_i) < 0 or max(srcs_i) >= i):
      bad = [j for j in srcs_i if not (0 <= j < i)]
      why = "itself (a cycle)" if i in bad else ("a later node (sources must come first)" if any(j > i for j in bad) and all(j < len(nodes) for j in bad) else "no node")
      report(i, name, "graph.src", f"src {bad[0]} refers to {why}"[:300]); continue
    ns = len(srcs_i)
    if ns < min_src or ns > max_src:
      report(i, name, "graph.arity", f"{name} takes {od.arity_text()}, got {ns} source{'s' if ns != 1 else ''}"); continue
    arg = node.arg
    err = null_arg_err if arg is None else arg_errors(od, arg)
    if err is not None:
      report(i, name, "arg.schema", err); continue
    c = top_bit if ctx is None else ctx[i]
    if c & off_levels:
      wrong = next(lv for lv in LEVELS if c & off_levels & _BIT[lv])
      report(i, name, "level.op", f"{name} may appear at level {', '.join(od.levels)}, not in a {wrong} graph"); continue
    lvl = _FIRST_LEVEL[c]
    # everything above depends on the node alone; what follows reads its sources' properties
    src = list(map(vget, srcs_i))
    if None in src: continue   # a source is already broken: do not cascade
    if not slots_ok(src):      # the quick yes failed: say what is wrong
      errs = _slot_errors(od, name, src)
      for rule, msg in errs: report(i, name, rule, msg)
      if errs: continue
    v = new_view(View)
    v.index, v.op, v.arg, v.src, v.value = i, name, arg, src, None
    if checks:
      try: all_good = checks_all(src, arg, name, lvl, v, None, None, None, None, None)
      except Exception: all_good = False
      if not all_good and not _run_checks(checks, src, arg, name, lvl, v, i, report): continue
    try:
      v.dtype, v.shape, v.device, v.addrspace, v.min_max, v.axis = dt, sh, _, _, _, _ = derive(src, arg, name, lvl, v)
    except RuleFail as e:
      report(i, name, e.rule, e.msg[:300]); continue
    except Exception as e:
      report(i, name, "internal.error", f"deriving properties failed ({type(e).__name__}: {e}); this is a bug in the tables"[:300]); continue
    if dt == "index":   # constant folding of shape operands
      if name == "CONST": v.value = arg["value"]
      elif name == "VCONST": v.value = tuple(arg["values"])
      elif name == "STACK" and all(s.value is not None and not isinstance(s.value, tuple) for s in src): v.value = tuple(s.value for s in src)
    if node.dtype is not None or node.shape is not None:
      if not _declared_ok(node, dt, sh, i, name, report): continue
    views[i] = v
  return ValidationResult(graph, diags, views, top)


def _run_checks(checks, src, arg, name, lvl, v, i, report) -> bool:
  """Evaluate the op checks one by one and report each that fails."""
  ok = True
  for chk in checks:
    try:
      good = chk.fn(src, arg, name, lvl, v, None, None, None, None, None)
    except RuleFail as e:
      report(i, name, e.rule, e.msg[:300]); ok = False; continue
    except Exception as e:  # a check that cannot even be evaluated counts as broken ...
      if ok: report(i, name, chk.rule, f"{chk.msg} ({type(e).__name__}: {e})"[:300])   # ... unless an earlier one explains it
      ok = False; continue
    if not good:
      report(i, name, chk.rule, chk.msg); ok = False
  return ok


def _declared_ok(node, dt, sh, i, name, report) -> bool:
  if node.dtype is not None:
    want = node.dtype if isinstance(node.dtype, tuple) else canonical(node.dtype)
    if want != dt:
      what = f"declared dtype {node.dtype}" if want is not None or isinstance(node.dtype, tuple) else f"declared dtype {node.dtype!r} is not a dtype, and"
      report(i, name, "declared.dtype", f"{what} but derived {dt}"[:300]); return False
  if node.shape is not None and tuple(node.shape) != tuple(sh):
    report(i, name, "declared.shape", f"declared shape {tuple(node.shape)} but derived {sh}"[:300]); return False
  return True


def validate_file(path, level: str = "auto", tables: Tables | None = None) -> ValidationResult:
  """Load and validate one file. A file that parses but breaks the file schema in places
  is still validated (broken nodes count as unknown), so every error is reported."""
  g, diags = load_file(path)
  if g is None:
    return ValidationResult(None, diags, [], None)
  res = validate(g, level, tables, file=str(path))
  if diags: res.diagnostics[:0] = diags
  return res


def derive_uop(u) -> None:
  """Fill `_props` of u and everything below it; raises ValueError if the graph is invalid."""
  g = Graph.from_uops(u)
  res = validate(g)
  if not res.ok:
    raise ValueError("invalid graph:\n" + "\n".join(d.format() for d in res.diagnostics[:20]))
  for uu, v in zip(g.uops(), res.views): uu._props = v
