"""The validator: checks a graph against the tables and derives every node's properties.

One pass over the nodes in file order (they are topologically sorted by construction),
so the cost is linear in the graph and no recursion is involved. For each node:
  op known -> sources are earlier nodes -> arity -> arg schema -> level (these need the
  node alone) -> source slots (kind, dtype) -> op checks -> derived properties ->
  declared dtype/shape (these read the sources' properties).
A node that breaks a rule is reported and then treated as unknown, so its consumers are
not blamed for it: every independent error is reported once. Where it breaks only dtype
rules, its consumers are still checked, against every dtype it may have, and an error
there is reported when no choice avoids it (tinyspec/recovery.py): errors below an
invalid node are found in the same run, cascades are not.

Public entry points:
  validate(graph, level)        every node of a Graph, or of the UOps below a UOp or roots
                                -> ValidationResult (diagnostics, Views)
  check_node(op, src, arg, level=...)   one node over its sources' Views -> View | [Diagnostic]
  derive_uop(u, level=...)      a UOp's View, checking only the nodes below it that lack one
                                (what the Tensor front end uses)
All three run the same per-node pipeline, _check, whose properties come from the one
derivation (tinyspec.props.derive_into; UOp.props derives through it without the checks). The level of each node (the contexts)
and the constants shape operands fold to come from ops.yaml (slot `level`, op `fold`).

Speed (bench/bench_validate.py): the per-op work is prepared once per Tables (_OpInfo:
a generated slot predicate, the op checks and-ed into one function, the six property
rules compiled into one), so a node costs a few dict lookups and two or three calls; the
detailed diagnostics are only computed for nodes that fail the quick yes.
"""
from __future__ import annotations
import jsonschema
from dataclasses import dataclass, field
from typing import NamedTuple
from tinyspec.tables import tables as _tables, Tables
from tinyspec.rules import RuleFail
from tinyspec import rules as _rules
from tinyspec.diagnostics import Diagnostic, EXIT_OK, Capped, max_diagnostics, did_you_mean
from tinyspec.dtypes import canonical, DTYPES
from tinyspec.frozen import key as _key, freeze, FrozenDict
from tinyspec.graph import Graph, load_file
from tinyspec.uop import UOp, toposort
from tinyspec.props import View, DerivationError, derive_into, FOLDS
from tinyspec import recovery as _recovery
from tinyspec.frozen import thaw
import gc

LEVELS = ("tensor", "kernel", "program")
_BIT = {"tensor": 1, "kernel": 2, "program": 4}
_FIRST_LEVEL = [next((lv for lv in LEVELS if c & _BIT[lv]), "tensor") for c in range(8)]


@dataclass
class ValidationResult:
  graph: Graph | None
  diagnostics: list[Diagnostic]
  views: list = field(default_factory=list)
  level: str | None = None
  uops: list | None = None      # validate(UOps): the UOps checked, in the order `views` and the diagnostics' node indices count

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
    nodes = self.graph.nodes if self.graph is not None else self.uops or []
    ops = (tables or _tables()).ops
    return [i for i, n in enumerate(nodes) if n.op in ops and ops[n.op].untrusted]


class Numbered(NamedTuple):
  """A graph as the validator walks it, in order: `nodes` (each with op, arg, dtype,
  shape: a file's Nodes or UOps), `srcs` (each node's sources as positions in `nodes`),
  `roots` (positions) and the level the graph declares (or None)."""
  nodes: list
  srcs: list
  roots: list
  level: str | None = None


def numbered_graph(g: Graph) -> Numbered:
  """A graph file's nodes as they stand (sources may be out of range: the checks say so)."""
  return Numbered(g.nodes, [n.src for n in g.nodes], g.root_indices, g.level)


def numbered_uops(roots, level: str | None = None) -> Numbered:
  """The UOps below `roots` (a UOp or a list), sources first (tinyspec.uop.toposort)."""
  roots = [roots] if isinstance(roots, UOp) else list(roots)
  order = toposort(roots)
  pos = {id(u): i for i, u in enumerate(order)}
  return Numbered(order, [tuple([pos[id(s)] for s in u.src]) for u in order], [pos[id(r)] for r in roots], level)


def detect_level(g: Graph | Numbered, T: Tables, present: set | None = None) -> str:
  """The level of a graph with none declared, from the op table:
    * the level the root's op puts its sources at, when a slot says (`level: program`:
      a LINEAR or PROGRAM root makes a program);
    * tensor when every op exists at tensor level, or when a node puts a source at another
      level through a slot `level` (a tensor graph CALLing a kernel SINK);
    * else kernel.
  `present` is the set of ops in the graph, if the caller has it."""
  nodes, srcs, roots, _ = numbered_graph(g) if isinstance(g, Graph) else g
  last = nodes[roots[-1]] if nodes and roots and 0 <= roots[-1] < len(nodes) else None
  od = T.ops.get(last.op) if last is not None else None
  for k in (od.level_slots if od is not None else ()):
    if isinstance(od.slots[k].level, str): return od.slots[k].level   # type: ignore[union-attr]  # od is not None where it has level slots
  if present is None: present = {n.op for n in nodes}
  ops = T.ops
  if all("tensor" in ops[n].levels for n in present if n in ops): return "tensor"
  openers = _openers(T, present)
  for i, n in enumerate(nodes):
    if n.op in openers and any(lv is not None for _, lv in _source_levels(ops[n.op], srcs[i], nodes, i)): return "tensor"
  return "kernel"


def _openers(T: Tables, present: set) -> set:
  """The present ops with a slot `level` (they may put sources at another level)."""
  return {n for n in present if n in T.ops and T.ops[n].level_slots}


def _source_levels(od, srcs, nodes, i):
  """(source index, the level its slot puts it at or None) for each valid source of node i."""
  for k, j in enumerate(srcs):
    if 0 <= j < i: yield j, od.slot_for(k).level_of(nodes[j].op)


def _contexts(g: Graph | Numbered, top: str, present: set, T: Tables) -> list[int] | None:
  """Bitmask of the levels each node is used at: a source in a slot with a `level` (in
  ops.yaml: LINEAR's and PROGRAM's sources, CALL's SINK body) is at that level, every
  other source at its consumer's, the roots at the graph's level. One reverse pass; None
  when no op opens another level (every node is at `top`)."""
  openers = _openers(T, present)
  if not openers: return None
  nodes, srcs, roots, _ = numbered_graph(g) if isinstance(g, Graph) else g
  ops, top_bit = T.ops, _BIT[top]
  n = len(nodes)
  ctx = [0] * n
  for r in roots:
    if 0 <= r < n: ctx[r] |= top_bit
  for i in range(n - 1, -1, -1):
    node = nodes[i]
    c = ctx[i] or top_bit
    ctx[i] = c
    if node.op in openers:
      for j, lv in _source_levels(ops[node.op], srcs[i], nodes, i): ctx[j] |= c if lv is None else _BIT[lv]
    else:
      for j in srcs[i]:
        if 0 <= j < i: ctx[j] |= c
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
    k: tuple
    if arg is None or t is int or t is str: k = (op.name, arg, t)   # fast path for the common args
    else:
      try: k = (op.name, _skeleton(arg) if op.skeleton_safe else _key(arg))
      except RecursionError: return "the arg is nested too deeply"
    if k in self.seen: return self.seen[k]
    err = None
    try:
      errs = list(op.arg_validator.iter_errors(thaw(arg)))
    except RecursionError:
      errs, err = [], "the arg is nested too deeply"
    if errs:
      e = jsonschema.exceptions.best_match(errs)
      path = "".join(f"[{p!r}]" for p in e.absolute_path)
      err = f"arg{path}: {_schema_message(e)}"[:300]
    if len(self.seen) >= self.LIMIT: self.seen.clear()
    self.seen[k] = err
    return err


_arg_cache = _ArgCache()


def _schema_message(e) -> str:
  """jsonschema's message, with a "did you mean" where a string is a near miss of an
  allowed value (a dtype name, an enum) or a key is a near miss of a known one."""
  if e.validator == "enum" and isinstance(e.instance, str):
    hint = did_you_mean(e.instance, e.validator_value)
    if hint: return f"{e.instance!r} is not one of the {len(e.validator_value)} allowed values{hint}"
  if e.validator == "additionalProperties" and isinstance(e.instance, dict) and isinstance(e.schema, dict):
    known = list(e.schema.get("properties", {}))
    extra = [k for k in e.instance if k not in known]
    if extra and not e.schema.get("patternProperties"):
      return "unknown key(s) " + ", ".join(repr(k) + did_you_mean(k, known) for k in extra[:10]) + f"; known: {', '.join(known)}"
  if e.validator == "required" and isinstance(e.instance, dict) and isinstance(e.schema, dict):
    missing = [k for k in e.validator_value if k not in e.instance]
    for k in e.instance:   # a required key written wrong: name the near miss
      if k not in e.schema.get("properties", {}) and did_you_mean(k, missing):
        return f"{e.message}; the arg has {k!r}{did_you_mean(k, missing)}"
  return e.message


def validate(graph, level: str = "auto", tables: Tables | None = None, file: str = "<graph>") -> ValidationResult:
  """Check every node of a Graph (a file's node list), or of the UOps below a UOp or a
  list of root UOps (or numbered_uops' numbering of them); return diagnostics and each valid node's View. A diagnostic names
  the node by its index: in the file for a Graph, in sources-first order (toposort) for
  UOps (ValidationResult.uops lists them). One pass, the same for both (_validate)."""
  if isinstance(graph, Graph): ns, g = numbered_graph(graph), graph
  else: ns, g = graph if isinstance(graph, Numbered) else numbered_uops(graph), None
  # The pass allocates ~10 objects per node that all stay alive; the cyclic GC would
  # rescan them again and again (quadratic in practice), and nothing here makes cycles.
  was = gc.isenabled(); gc.disable()
  try:
    diags, views, top = _validate(ns, level, tables, file)
    return ValidationResult(g, diags, views, top, None if g is not None else ns.nodes)
  finally:
    if was: gc.enable()


def _slot_plan(od):
  """Per source position: (slot name, kind, allowed dtypes or None, same-as slot or None);
  kind None for slots that accept any node (UNCHECKED_KINDS)."""
  plan = getattr(od, "_plan", None)
  if plan is None:
    plan = []
    for s in od.slots:
      plan.append((s.name, s.kind if s.checked else None, s.allowed(), s.dtype["same"] if isinstance(s.dtype, dict) else None))
    od._plan = plan
  return plan


_VALUE, _SHAPE, _RANGE, _VOID = "value", "shape", "range", "void"


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
  for k, (_sname, kind, allowed, same) in enumerate(_slot_plan(od)):
    if kind is None: continue   # any node goes
    var = od.slots[k].variadic
    x = "x" if var else f"src[{k}]"
    c = []
    if kind == _RANGE: c.append(f"{x}.op == 'RANGE'")
    elif kind == _VOID: c.append(f"{x}.dtype == 'void'")
    elif kind == _SHAPE: c.append(f"{x}.dtype == 'index' and len({x}.shape) <= 1")
    elif allowed is None: c.append(f"type({x}.dtype) is str and {x}.dtype != 'void'")
    if allowed is not None:
      env[f"A{k}"] = allowed; c.append(f"{x}.dtype in A{k}")   # dtype names: excludes void and tuples
    if same is not None:
      j = names.index(same)
      c.append(f"(len(src) <= {j} or {x}.dtype == src[{j}].dtype)")
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
    if kind is None: continue
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


# ------------------------------------------------------------------ one node
class _OpInfo(NamedTuple):
  """What the per-node pipeline needs of one op, gathered once per Tables (a tuple, so
  _check unpacks it in one step)."""
  od: object            # the Op
  min_src: int
  max_src: float
  off_levels: int       # level bits where the op may not appear
  slots_ok: object      # src -> bool, the quick yes of the slot checks
  checks: list
  checks_all: object    # all checks as one function (None without checks)
  derive: object        # the six property rules as one function
  null_arg_err: str | None   # the arg.schema error of a null arg, or None
  fold: object          # (arg, src) -> the folded constant, or None (no `fold:`)


def _op_info(od, arg_errors) -> _OpInfo:
  off_levels = 7 & ~sum(_BIT[lv] for lv in od.levels if lv in _BIT)
  return _OpInfo(od, od.min_src, od.max_src, off_levels, _slots_pred(od), od.checks, od.checks_all, od.derive_all,
                 arg_errors(od, None), FOLDS[od.fold] if od.fold else None)


def _op_infos(T: Tables, arg_cache) -> dict:
  infos = T.__dict__.get("_validate_infos")
  if infos is None or infos[0] is not arg_cache:
    infos = (arg_cache, {name: _op_info(od, arg_cache.errors) for name, od in T.ops.items()})
    T._validate_infos = infos
  return infos[1]


def _arg_cache_for(T: Tables, tables_given: bool) -> _ArgCache:
  return _arg_cache if not tables_given else T.__dict__.setdefault("_arg_cache", _ArgCache())


_new_view = View.__new__


def _check(info, name, arg, src, c, i, dtype, shape, report, arg_errors, guess=None):
  """The per-node pipeline, shared by validate() and check_node(): arity -> arg schema ->
  level (these need the node alone; `c` is the bitmask of the levels it is used at) ->
  source slots -> op checks -> derived properties -> constant folding -> declared
  dtype/shape (`dtype`, `shape`: what the node declares, or None). Returns the node's
  View, or None after reporting each broken rule through report(i, op, rule, msg). A
  None in `src` (a broken source) stops it silently after the node-alone steps, so
  consumers are not blamed for their sources. With `guess` (a list), a node that breaks
  only dtype rules appends the View derived anyway: what its consumers are checked
  against (tinyspec/recovery.py)."""
  od, min_src, max_src, off_levels, slots_ok, checks, checks_all, derive, null_arg_err, fold = info
  ns = len(src)
  if ns < min_src or ns > max_src:
    report(i, name, "graph.arity", f"{name} takes {od.arity_text()}, got {ns} source{'s' if ns != 1 else ''}"); return None
  err = null_arg_err if arg is None else arg_errors(od, arg)
  if err is not None:
    report(i, name, "arg.schema", err); return None
  if c & off_levels:
    wrong = next(lv for lv in LEVELS if c & off_levels & _BIT[lv])
    report(i, name, "level.op", f"{name} may appear at level {', '.join(od.levels)}, not in a {wrong} graph"); return None
  lvl = _FIRST_LEVEL[c]
  # everything above depends on the node alone; what follows reads its sources' properties
  if None in src: return None
  failed = []
  if not slots_ok(src):      # the quick yes failed: say what is wrong
    errs = _slot_errors(od, name, src)
    for rule, msg in errs: report(i, name, rule, msg)
    failed = [rule for rule, _ in errs]
  v = _new_view(View)
  v.index, v.op, v.arg, v.src, v.value = i, name, arg, src, None
  if checks and not failed:
    try: all_good = checks_all(src, arg, name, lvl, v, None, None, None, None, None)
    except Exception: all_good = False
    if not all_good: failed = _run_checks(checks, src, arg, name, lvl, v, i, report)
  if failed:
    if guess is not None and _recovery.recoverable(failed): _recovery.derive_guess(derive, src, arg, name, lvl, v, guess)
    return None
  try:
    derive_into(v, derive, fold, src, lvl)
  except RuleFail as e:
    report(i, name, e.rule, e.msg[:300]); return None
  except Exception as e:
    report(i, name, "internal.error", f"deriving properties failed ({type(e).__name__}: {e}); this is a bug in the tables"[:300]); return None
  dt, sh = v.dtype, v.shape
  if type(sh) is tuple and len(sh) > _rules.MAX_RANK and type(dt) is str:   # a STACK chain grows rank without shape operands
    report(i, name, "shape.limit", f"a shape of {len(sh)} dims, more than limits.max_rank = {_rules.MAX_RANK}"); return None
  if (dtype is not None or shape is not None) and not _declared_ok(dtype, shape, dt, sh, i, name, report):
    if guess is not None and (shape is None or tuple(shape) == tuple(sh)): guess.append(v)   # (the dtype alone is wrong)
    return None
  return v



def _validate(graph: Numbered, level: str, tables: Tables | None, file: str, known: list | None = None) -> tuple[list, list, str]:
  """validate(): (diagnostics, each node's View or None, the graph's level); `known`:
  Views already derived for the first len(known) nodes (taken as they are, see
  derive_uop)."""
  T = tables or _tables()
  diags = Capped(max_diagnostics())
  add = diags.add
  nodes, srcs, roots, declared = graph
  present = {nd.op for nd in nodes}
  top = level if level in LEVELS else (declared or detect_level(graph, T, present))
  ctx = _contexts(graph, top, present, T)
  top_bit = _BIT[top]
  views: list[View | None] = [None] * len(nodes)
  first = 0
  if known:
    first = len(known); views[:first] = known
  vget = views.__getitem__
  arg_errors = _arg_cache_for(T, tables is not None).errors
  infos = _op_infos(T, _arg_cache_for(T, tables is not None))
  check = _check

  def report(i, op, rule, msg):
    add(Diagnostic(file, i, op, rule, msg))
  guess: list = []              # the View an invalid node whose dtype alone is unknown leaves here
  below = _recovery.Below()     # such nodes and their consumers: what they may be

  for r in roots:
    if not (0 <= r < len(nodes)): report(None, None, "graph.src", f"root {r} is not a node index (the graph has nodes 0 to {len(nodes) - 1})")
  if not roots: report(None, None, "graph.src", "the graph has no root")

  for i in range(first, len(nodes)):
    node = nodes[i]
    name = node.op
    info = infos.get(name)
    if info is None:
      if name != "?": report(i, name, "graph.unknown_op", _unknown_op(name, T))   # "?": already a file.schema error
      continue
    srcs_i = srcs[i]
    if srcs_i and (min(srcs_i) < 0 or max(srcs_i) >= i):
      bad = [j for j in srcs_i if not (0 <= j < i)]
      why = "itself (a cycle)" if i in bad else ("a later node (sources must come first)" if any(j > i for j in bad) and all(j < len(nodes) for j in bad) else "no node")
      report(i, name, "graph.src", f"src {bad[0]} refers to {why}; node {i} may use nodes 0 to {i - 1}"[:300] if i else
                                   f"src {bad[0]} refers to {why}; node 0 has no earlier node to use"); continue
    c, src = top_bit if ctx is None else ctx[i], list(map(vget, srcs_i))
    if below.guesses and None in src:   # below an invalid node: checked against what it may be (tinyspec/recovery.py)
      for found in below.check(i, srcs_i, views, lambda s, rep, g: check(
          info, name, node.arg, s, c, i, node.dtype, node.shape, lambda *d: rep(Diagnostic(file, *d)), arg_errors, g)): add(found)
      continue
    views[i] = check(info, name, node.arg, src, c, i, node.dtype, node.shape, report, arg_errors, guess)
    if guess: below.note(i, guess.pop())
  return diags.close(file), views, top


def _unknown_op(name, T: Tables) -> str:
  return f"unknown op {name!r}{did_you_mean(name, T.ops)}"[:300]


def _run_checks(checks, src, arg, name, lvl, v, i, report) -> list:
  """Evaluate the op checks one by one and report each that fails; the rules broken
  (an exception counts as its check's rule)."""
  failed = []
  for chk in checks:
    try:
      good = chk.fn(src, arg, name, lvl, v, None, None, None, None, None)
    except RuleFail as e:
      report(i, name, e.rule, e.msg[:300]); failed.append(e.rule); continue
    except Exception as e:  # a check that cannot even be evaluated counts as broken ...
      if not failed: report(i, name, chk.rule, f"{chk.msg} ({type(e).__name__}: {e})"[:300])   # ... unless an earlier one explains it
      failed.append(chk.rule); continue
    if not good:
      report(i, name, chk.rule, _check_message(chk, src, arg, name, lvl, v)[:300]); failed.append(chk.rule)
  return failed


def _check_message(chk, src, arg, name, lvl, v) -> str:
  """A failed check's message, with the quantities it compared (its `says:`) where it has
  them; a `says` that cannot be evaluated (an earlier rule is broken too) is left off."""
  if chk.says is None: return chk.msg
  try: return f"{chk.msg}: {chk.says(src, arg, name, lvl, v, None, None, None, None, None)}"
  except Exception: return chk.msg


def _declared_ok(dtype, shape, dt, sh, i, name, report) -> bool:
  if dtype is not None:
    want = dtype if isinstance(dtype, tuple) else canonical(dtype)
    if want != dt:
      what = f"declared dtype {dtype}" if want is not None or isinstance(dtype, tuple) else f"declared dtype {dtype!r} is not a dtype{did_you_mean(dtype, DTYPES)},"
      report(i, name, "declared.dtype", f"{what} but derived {dt}"[:300]); return False
  if shape is not None and tuple(shape) != tuple(sh):
    report(i, name, "declared.shape", f"declared shape {tuple(shape)} but derived {sh}"[:300]); return False
  return True


def validate_file(path, level: str = "auto", tables: Tables | None = None) -> ValidationResult:
  """Load and validate one file. A file that parses but breaks the file schema in places
  is still validated (broken nodes count as unknown), so every error is reported."""
  g, diags = load_file(path)
  if g is None:
    return ValidationResult(None, diags, [], None)
  res = validate(g, level, tables, file=str(path))
  if diags: res.diagnostics = Capped.merge(str(path), max_diagnostics(), diags, res.diagnostics)
  return res


# ------------------------------------------------------------------ node by node
def check_node(op: str, src, arg=None, *, level: str = "tensor", dtype=None, shape=None, tables: Tables | None = None,
               index: int | None = None, file: str = "<node>") -> "View | list[Diagnostic]":
  """Check one node whose sources already have Views, as validate() checks each node of a
  graph (the same code: arity, arg schema, level, source slots, op checks, derived
  properties, constant folding, declared dtype/shape). Returns the node's View, or the
  list of Diagnostics (rule ids) that reject it.

    op     the op name;  src: the sources' Views;  arg: the node's arg (JSON value)
    level  the level the node is used at (tensor, kernel, program)
    dtype, shape   what the node declares, if anything (checked against the derived ones)
    index  the node's index, for messages and View.index (None: not in a graph)
  """
  T = tables or _tables()
  if level not in _BIT: raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
  src = list(src)
  if any(not isinstance(s, View) for s in src): raise TypeError("check_node needs a View for every source (derive the sources first)")
  if type(arg) is dict or type(arg) is list: arg = freeze(arg)
  if type(dtype) is list: dtype = tuple(dtype)
  cache = _arg_cache_for(T, tables is not None)
  info = _op_infos(T, cache).get(op)
  diags: list[Diagnostic] = []
  if info is None: return [Diagnostic(file, index, op, "graph.unknown_op", _unknown_op(op, T))]
  v = _check(info, op, arg, src, _BIT[level], index, dtype, shape, lambda i, o, rule, msg: diags.append(Diagnostic(file, i, o, rule, msg)), cache.errors)
  return v if v is not None else diags


def derive_uop(u, level: str = "auto", tables: Tables | None = None) -> View:
  """The View of UOp u, stored in `u._props` with those of every node below it, computed
  incrementally: only the nodes not yet checked are checked (each once, against its
  sources' Views), so a front end that asks after every new node pays O(1) per node.
  `level`: the level of the graph rooted at u (auto: detect_level over the nodes being
  derived and their derived sources); a slot `level` (a CALLed SINK...) puts nodes below
  it at their own level, as in validate(). Raises DerivationError if a node is invalid;
  then nothing is stored."""
  if u._checked: return u._props
  if level != "auto" and all(s._checked for s in u.src):   # the common case: one new node on checked ones
    r = check_node(u.op, [s._props for s in u.src], u.arg, level=level, dtype=u.dtype, shape=u.shape, tables=tables, file="<uop>")
    if isinstance(r, list): raise DerivationError(r)
    u._props, u._checked = r, True
    return r
  frontier, order = _underived(u)
  nodes = frontier + order     # the derived sources first: their Views are known, their sources not looked at again
  pos = {id(x): i for i, x in enumerate(nodes)}
  srcs = [()] * len(frontier) + [tuple([pos[id(s)] for s in x.src]) for x in order]
  was = gc.isenabled(); gc.disable()
  try: diags, views, _ = _validate(Numbered(nodes, srcs, [len(nodes) - 1]), level, tables, "<uop>", [x._props for x in frontier])
  finally:
    if was: gc.enable()
  if diags: raise DerivationError(diags)
  for x, v in zip(order, views[len(frontier):]): x._props, x._checked = v, True
  return views[-1]   # (u is the last of the nodes just derived)


def _underived(u) -> tuple[list, list]:
  """(the derived nodes directly below the underived part, the underived nodes below u,
  sources first): an iterative post-order walk that does not enter checked nodes (a node
  whose View props() derived without the checks is checked again)."""
  frontier, order, seen = [], [], set()
  stack = [(u, False)]
  while stack:
    x, done = stack.pop()
    if done: order.append(x); continue
    if id(x) in seen: continue
    seen.add(id(x))
    if x._checked: frontier.append(x); continue
    stack.append((x, True))
    stack.extend((s, False) for s in reversed(x.src) if id(s) not in seen)
  return frontier, order

