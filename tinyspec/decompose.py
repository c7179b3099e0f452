"""Decompositions, executable: the step language of spec/decompositions.yaml.

ops.yaml gives each decomposed op a `decomposition:` (a step list, or `{template: NAME}`
naming a template in decompositions.yaml, whose header documents the language). This
module interprets it and knows only the step forms, never a particular op:

  decomposition_of(op, dtype)  the op's decomposition for one dtype, flattened into
                               primitive steps (templates, Horner polynomials, parameters
                               and nested decomposed ops all inlined)
  decompose(graph, ops=None)   a graph (or UOp roots) with every node of a decomposed op
                               replaced by that primitive subgraph

Flattening works on names and dtypes only. The dtype of every step comes from the
validator itself: each new step is checked as a tiny graph (its op over PARAMs of its
sources' dtypes), so a template that breaks a table rule is reported at the step that
breaks it, and dtypes are never guessed here.
"""
from __future__ import annotations
from typing import NoReturn
from dataclasses import dataclass
from functools import lru_cache
import yaml
from tinyspec import spec  # type: ignore[attr-defined]  # spec/ is installed as tinyspec.spec (setup.py maps the folder)
from tinyspec.dtypes import dtype as _dtype
from tinyspec.frozen import freeze, thaw, key as _key
from tinyspec.graph import Graph
from tinyspec.tables import tables
from tinyspec.uop import UOp
from tinyspec.validate import validate, numbered_graph, numbered_uops
import gc


# The helper templates the interpreter itself inlines (a `compute:` result cast back to a
# saturating dtype), not through a `use:` step.
CAST_BACK_TEMPLATES = ("finite_nonzero", "saturate_overflow")


class DecompositionError(ValueError):
  """A decomposition cannot be flattened or a graph cannot be decomposed (message says where)."""


@lru_cache(maxsize=None)
def templates() -> dict:
  """The named templates of spec/decompositions.yaml."""
  with open(spec.path("decompositions.yaml")) as f: return yaml.safe_load(f)["templates"]


def decomposed_ops() -> frozenset[str]:
  """Every op the tables give a decomposition."""
  return frozenset(n for n, o in tables().ops.items() if o.decomposition is not None)


# ------------------------------------------------------------------ flattened form
@dataclass(frozen=True)
class Const:
  value: object
  dtype: str

  def to_json(self) -> dict: return {"const": self.value, "dtype": self.dtype}


@dataclass(frozen=True)
class Step:
  name: str
  op: str
  src: tuple            # names (str) and Consts
  arg: object = None    # frozen

  def to_json(self) -> dict:
    d = {"as": self.name, "op": self.op, "src": [s.to_json() if isinstance(s, Const) else s for s in self.src]}
    if self.arg is not None: d["arg"] = thaw(self.arg)
    return d


@dataclass
class Flat:
  """A decomposition for fixed input dtypes: steps over the op's slot names; the value of
  step `result` is the op's value."""
  inputs: tuple[str, ...]
  steps: tuple[Step, ...]
  result: str
  dtypes: dict          # name -> dtype, inputs and steps
  _plan: list | None = None

  def plan(self) -> list:
    """The steps with their constants as (hash-consed) CONST UOps, built once: a source
    is then a UOp or a name."""
    if self._plan is None:
      self._plan = [(st.name, st.op, tuple(UOp("CONST", (), {"value": x.value, "dtype": x.dtype}) if isinstance(x, Const) else x
                                           for x in st.src), st.arg) for st in self.steps]
    return self._plan


# ------------------------------------------------------------------ constants and dtypes
def const_value(v, dt: str):
  """A constant as CONST stores it in dtype dt: integers wrap into the dtype's range (two's
  complement), bools are True/False, floats are floats or the strings nan/inf/-inf."""
  d = _dtype(dt)
  if d.cls == "bool": return bool(v)
  if d.is_int:
    if not isinstance(v, (int, bool)):
      raise DecompositionError(f"constant {v!r} is not an integer, but the dtype is {dt}")
    v = int(v) % (1 << d.bits)
    return v - (1 << d.bits) if d.is_signed and v > d.max else v
  if isinstance(v, str):
    if v not in ("nan", "inf", "-inf"): raise DecompositionError(f"constant {v!r} is not a number")
    return v
  return float(v)


@lru_cache(maxsize=None)
def _derive(op: str, src_dtypes: tuple, arg_key, arg) -> str:
  """The dtype the validator derives for `op` over ()-shaped sources of these dtypes."""
  scalar = UOp("VCONST", (), {"values": [], "dtype": "index"})
  res = validate(UOp(op, tuple(UOp("PARAM", (scalar,), {"slot": k, "dtype": d}) for k, d in enumerate(src_dtypes)), arg))
  if not res.ok:
    raise DecompositionError("; ".join(f"{d.message} [{d.rule}]" for d in res.diagnostics))
  return res.views[-1].dtype


# ------------------------------------------------------------------ the interpreter
class _Builder:
  """Interprets steps, appending primitive Steps. Names bound in a step list (its scope)
  map to refs: a flat step's name or a Const."""

  def __init__(self, expand: frozenset[str]):
    self.expand = expand
    self.steps: list[Step] = []
    self.dtypes: dict[str, str] = {}
    self.used: set[str] = set()
    self.where: list[str] = []      # context for error messages
    self.active: list[str] = []     # ops/templates being inlined (cycle check)

  def fail(self, msg: str) -> NoReturn:
    raise DecompositionError(" > ".join(self.where) + ": " + msg)

  def fresh(self, name: str | None) -> str:
    base = name or "t"
    n, k = base, 1
    while n in self.used: n, k = f"{base}.{k}", k + 1
    self.used.add(n)
    return n

  def dtype(self, ref) -> str:
    return ref.dtype if isinstance(ref, Const) else self.dtypes[ref]

  # -- parameters
  def subst(self, v, params: dict):
    if isinstance(v, str) and v.startswith("$"):
      path = v[1:].split(".")
      if path[0] not in params: self.fail(f"unknown parameter {v!r}")
      x = params[path[0]]
      for p in path[1:]:
        try: x = x[int(p)] if isinstance(x, (list, tuple)) else x[p]
        except (KeyError, IndexError, ValueError, TypeError): self.fail(f"parameter {v!r} has no element {p!r}")
      return x
    if isinstance(v, list): return [self.subst(x, params) for x in v]
    if isinstance(v, dict): return {k: self.subst(x, params) for k, x in v.items()}
    return v

  # -- sources
  def sources(self, op: str, src: list, scope: dict, params: dict) -> list:
    """Refs for a step's sources; constants without a dtype take the dtype of the source
    their slot must match (`same:` in either direction)."""
    refs: list = [None] * len(src)
    pending = []
    for k, s in enumerate(src):
      if isinstance(s, dict) and "const" in s:
        if "dtype" in s: refs[k] = self._const(s["const"], self.subst(s["dtype"], params), params)
        else: pending.append(k)
      elif isinstance(s, str):
        if s not in scope: self.fail(f"{op}: unknown name {s!r}")
        refs[k] = scope[s]
      else: self.fail(f"{op}: a source must be a name or {{const: ...}}, not {s!r}")
    if pending:
      od = tables().ops.get(op)
      if od is None: self.fail(f"unknown op {op}")
      for k in pending:
        dt = self._matched_dtype(od, k, refs)
        if dt is None: self.fail(f"{op}: constant source {k} needs a dtype (no other source fixes it)")
        refs[k] = self._const(src[k]["const"], dt, params)
    return refs

  def _matched_dtype(self, od, k: int, refs: list) -> str | None:
    names = [od.slot_for(j).name for j in range(len(refs))]
    me = od.slot_for(k)
    linked = set()
    if isinstance(me.dtype, dict): linked.add(me.dtype["same"])
    linked |= {s.name for s in od.slots if isinstance(s.dtype, dict) and s.dtype.get("same") == me.name}
    for j, r in enumerate(refs):
      if j != k and r is not None and names[j] in linked: return self.dtype(r)
    allowed = me.allowed()
    return next(iter(allowed)) if allowed is not None and len(allowed) == 1 else None

  def _const(self, v, dt, params) -> Const:
    try: return Const(const_value(self.subst(v, params), dt), dt)
    except (DecompositionError, KeyError) as e: self.fail(f"constant {v!r} in {dt}: {e}")

  # -- steps
  def op_step(self, op: str, refs: list, arg, name: str | None):
    """One op over refs: inlined if it is to be expanded, else a primitive Step."""
    if op in self.expand:
      return self.inline_op(op, refs, arg)
    try:
      dt = _derive(op, tuple(self.dtype(r) for r in refs), _key(freeze(arg)), freeze(arg))
    except DecompositionError as e: self.fail(f"{op}: {e}")
    n = self.fresh(name)
    self.steps.append(Step(n, op, tuple(refs), freeze(arg)))
    self.dtypes[n] = dt
    return n

  def inline_op(self, op: str, refs: list, arg):
    od = tables().ops[op]
    if op in self.active: self.fail(f"{op}'s decomposition uses {op} again (a cycle)")
    self.active.append(op); self.where.append(op)
    try:
      dec = od.decomposition
      params = {"arg": thaw(arg)}
      slots = [s.name for s in od.slots][:len(refs)]
      if isinstance(dec, dict) and "template" in dec:
        outs = self.template(dec["template"], refs, params, {})
        if len(outs) != 1: self.fail(f"template {dec['template']} has {len(outs)} outputs, an op has one value")
        return outs[0]
      if not isinstance(dec, list): self.fail(f"decomposition must be a step list or {{template: NAME}}, not {dec!r}")
      scope = dict(zip(slots, refs))
      return self.run(dec, scope, params)
    finally:
      self.active.pop(); self.where.pop()

  def template(self, name: str, refs: list, caller: dict, with_: dict) -> list:
    tpl = templates().get(name)
    if tpl is None: self.fail(f"no template {name!r} in decompositions.yaml")
    if name in self.active: self.fail(f"template {name} uses itself (a cycle)")
    inputs = tpl.get("inputs", [])
    if len(inputs) != len(refs): self.fail(f"template {name} takes {len(inputs)} inputs, got {len(refs)}")
    self.active.append(name); self.where.append(f"template {name}")
    try:
      params = dict(caller)
      back = None
      if "params" in tpl:
        dt = self.dtype(refs[0])
        entry = tpl["params"].get(dt)
        if entry is None: self.fail(f"no parameters for dtype {dt} (it supports {', '.join(tpl['params'])})")
        entry = dict(entry)
        if "compute" in entry:
          work = entry.pop("compute")
          base = tpl["params"].get(work)
          if base is None or "compute" in base: self.fail(f"compute dtype {work} has no parameters of its own")
          entry = {**base, **entry}
          cast = [self.dtype(r) == dt for r in refs]
          refs = [self.op_step("CAST", [r], work, None) if c else r for r, c in zip(refs, cast)]
          back = (work, dt, [r for r, c in zip(refs, cast) if c])
          dt = work
        params.update(entry)
        params["dtype"] = dt
      params.update({k: self.subst(v, caller) for k, v in with_.items()})
      scope = dict(zip(inputs, refs))
      last = self.run(tpl["steps"], scope, params)
      outs = [scope[o] if o in scope else self.fail(f"output {o!r} is never bound") for o in tpl["outputs"]] if "outputs" in tpl else [last]
      if back is not None:
        outs = [self.cast_back(o, *back) if self.dtype(o) == back[0] else o for o in outs]
      return outs
    finally:
      self.active.pop(); self.where.pop()

  def cast_back(self, out, work: str, dt: str, operands: list):
    """A result computed in `work` cast back to dt; to a saturating dt through the helper
    templates finite_nonzero and saturate_overflow (decompositions.yaml header)."""
    target = _dtype(dt)
    if target.saturate:
      ok = None
      for x in operands:
        fin = self.template(CAST_BACK_TEMPLATES[0], [x], {}, {})[0]
        ok = fin if ok is None else self.op_step("AND", [ok, fin], None, None)
      top = target.normal_range[1]
      out = self.template(CAST_BACK_TEMPLATES[1], [out, ok], {"finite_max": top, "neg_finite_max": -top}, {})[0]
    return self.op_step("CAST", [out], dt, None)

  def run(self, steps: list, scope: dict, params: dict):
    """Run a step list in `scope` (updated in place); returns the last step's ref."""
    last = None
    for i, st in enumerate(steps):
      self.where.append(f"step {i}")
      try:
        if not isinstance(st, dict): self.fail(f"a step must be a mapping, not {st!r}")
        name = st.get("as")
        if "op" in st:
          refs = self.sources(st["op"], st.get("src", []), scope, params)
          last = self.op_step(st["op"], refs, self.subst(st.get("arg"), params), name if isinstance(name, str) else None)
          outs = [last]
        elif "horner" in st:
          last = self.horner(self.subst(st["horner"], params), st.get("x"), scope, params, name)
          outs = [last]
        elif "use" in st:
          src = st.get("src", [])
          missing = [s for s in src if not isinstance(s, str) or s not in scope]
          if missing: self.fail(f"`use:` sources must be bound names, not {missing[0]!r}")
          refs = [scope[s] for s in src]
          outs = self.template(st["use"], refs, params, st.get("with", {}))
          last = outs[-1]
        else:
          self.fail(f"unknown step form {sorted(st)} (expected op, horner or use)")
        if isinstance(name, list):
          if len(name) != len(outs): self.fail(f"`as` names {len(name)} values, the step gives {len(outs)}")
          scope.update(zip(name, outs))
        elif name is not None:
          scope[name] = last
      finally:
        self.where.pop()
    if last is None: self.fail("empty step list")
    return last

  def horner(self, coeffs, x: str | None, scope: dict, params: dict, name):
    if not isinstance(coeffs, list) or not coeffs: self.fail(f"horner needs a non-empty coefficient list, not {coeffs!r}")
    if x not in scope: self.fail(f"horner: unknown name {x!r}")
    xr = scope[x]
    acc = self._const(coeffs[0], self.dtype(xr), params)
    for k, c in enumerate(coeffs[1:]):
      acc = self.op_step("MUL", [acc, xr], None, None)
      last = k == len(coeffs) - 2
      acc = self.op_step("ADD", [acc, self._const(c, self.dtype(xr), params)], None, name if last and isinstance(name, str) else None)
    return acc


def _input_dtypes(op: str, dtype: str) -> tuple[str, ...]:
  """dtype for every fixed source slot, except slots that allow only one dtype."""
  od = tables().ops[op]
  out = []
  for s in od.slots:
    if s.variadic or s.optional: break
    allowed = s.allowed()
    out.append(next(iter(allowed)) if allowed is not None and len(allowed) == 1 else dtype)
  return tuple(out)


_flat_cache: dict = {}


def flatten(op: str, src_dtypes: tuple, arg=None, ops: frozenset | None = None) -> Flat:
  """op's decomposition for sources of these dtypes, inlined until no op of `ops`
  (default: every decomposed op) is left. Cached."""
  want = decomposed_ops() if ops is None else frozenset(ops)
  arg = freeze(arg)
  k = (op, tuple(src_dtypes), _key(arg), want)
  hit = _flat_cache.get(k)
  if hit is not None: return hit
  od = tables().ops.get(op)
  if od is None: raise DecompositionError(f"unknown op {op!r}")
  if od.decomposition is None: raise DecompositionError(f"{op} has no decomposition")
  b = _Builder(want)
  slots = tuple(s.name for s in od.slots)[:len(src_dtypes)]
  for n, d in zip(slots, src_dtypes):
    b.used.add(n); b.dtypes[n] = d
  b.where.append(f"{op} ({', '.join(src_dtypes)})")
  result = b.inline_op(op, list(slots), arg)
  if isinstance(result, Const) or result in slots:
    # the value is a constant or an input: give it a node of its own so it has a step
    result = b.op_step("CAST", [result], b.dtype(result), "result")
  flat = Flat(slots, tuple(b.steps), result, dict(b.dtypes))
  _flat_cache[k] = flat
  return flat


def decomposition_of(opname: str, dtype: str, arg=None) -> list[dict]:
  """The primitive steps of `opname` for inputs of `dtype` (slots that allow only one dtype
  keep it): a list of {as, op, src, arg?} whose sources are the op's slot names, earlier
  `as` names and {const, dtype}; the last step is the value."""
  flat = flatten(opname, _input_dtypes(opname, dtype), arg)
  steps = [s.to_json() for s in flat.steps]
  return steps


# ------------------------------------------------------------------ decomposing graphs
def _instantiate(flat: Flat, srcs: list) -> tuple[UOp, list[UOp]]:
  """The flat steps as UOps over the given source UOps; also every UOp made, in order."""
  env = dict(zip(flat.inputs, srcs))
  made: list[UOp] = []
  for name, op, src, arg in flat.plan():
    args = []
    for x in src:
      if type(x) is str: args.append(env[x])
      else: made.append(x); args.append(x)
    u = env[name] = UOp(op, tuple(args), arg)
    made.append(u)
  return env[flat.result], made


def decompose(graph_or_uops, ops=None):
  """Replace every node of a decomposed op (or only of the ops named in `ops`) by its
  decomposition, repeatedly, until none of those ops is left: with the default every
  decomposed op goes and only primitives remain; with `ops` the others stay (a backend
  keeps the ops it renders natively). Takes and returns a Graph, a UOp, or a list of UOps.

  Each replacement computes the same dtype and (broadcast) shape as the node it replaces,
  and carries the node's declared dtype/shape, tag and name. One pass over the nodes in
  file order (no recursion); identical subgraphs are shared through hash-consed UOps.
  Inside LINEAR-like ops (whose checks require their sources listed in order) the new
  nodes are listed just before the instruction they replace."""
  was = gc.isenabled(); gc.disable()   # many long-lived allocations, no cycles (as in validate)
  try: return _decompose(graph_or_uops, ops)
  finally:
    if was: gc.enable()


def _decompose(graph_or_uops, ops):
  T = tables()
  g = graph_or_uops if isinstance(graph_or_uops, Graph) else None
  if g is not None: ns = numbered_graph(g)
  elif isinstance(graph_or_uops, UOp): ns = numbered_uops(graph_or_uops)
  else:
    roots = list(graph_or_uops)
    if not roots or not all(isinstance(r, UOp) for r in roots): raise DecompositionError("decompose takes a Graph, a UOp or a list of UOps")
    ns = numbered_uops(roots)
  want = decomposed_ops()
  if ops is not None:
    ops = frozenset(ops)
    bad = sorted(o for o in ops if o not in want)
    if bad: raise DecompositionError(f"no decomposition for {', '.join(bad)}")
    want = ops
  res = validate(g if g is not None else ns)
  if not res.ok:
    raise DecompositionError("cannot decompose an invalid graph:\n" + "\n".join(d.format() for d in res.diagnostics[:20]))
  listing = T.listing_ops
  views = res.views
  new: list = [None] * len(ns.nodes)
  made_by: dict[int, list] = {}
  for i, node in enumerate(ns.nodes):   # a file's Nodes or the UOps, sources first
    src_at = ns.srcs[i]
    src = [new[j] for j in src_at]
    if node.op in want:
      try:
        flat = flatten(node.op, tuple(views[j].dtype for j in src_at), node.arg, want)
      except DecompositionError as e:
        raise DecompositionError(f"node {i} ({node.op}): {e}") from None
      u, made = _instantiate(flat, src)
      if node.dtype is not None or node.shape is not None or node.tag is not None or node.name is not None:
        u = u.replace(dtype=node.dtype, shape=node.shape, tag=node.tag, name=node.name)
        made[-1] = u
      made_by[i] = made
      new[i] = u
      continue
    if node.op in listing and made_by:
      listed, seen = [], set()
      for j, s in zip(src_at, src):
        for m in made_by.get(j, (s,)):
          if id(m) not in seen: seen.add(id(m)); listed.append(m)
      src = listed
    new[i] = UOp(node.op, tuple(src), node.arg, dtype=node.dtype, shape=node.shape, tag=node.tag, name=node.name)
  roots = [new[r] for r in ns.roots]
  if g is not None: return Graph.from_uops(*roots, level=g.level, meta=g.meta)
  return roots[0] if isinstance(graph_or_uops, UOp) else roots
