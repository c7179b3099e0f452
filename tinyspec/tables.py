"""Loads spec/ops.yaml and spec/derived.yaml into Op objects with compiled rules.

Everything op-specific that the validator, the docs and the strategies know comes from
here; nothing in Python lists op names.
"""
from __future__ import annotations
import copy
import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any
import yaml
import jsonschema
from tinyspec import spec  # type: ignore[attr-defined]  # spec/ is installed as tinyspec.spec (setup.py maps the folder)
from tinyspec import rules
from tinyspec.dtypes import DTYPES, GROUPS, CLASSES
import re
from tinyspec.dtypes import dtype as _dt
import hashlib

PROPS = ("dtype", "shape", "device", "addrspace", "min_max", "axis")
SLOT_KINDS = ("value", "shape", "range", "void", "any", "body", "listing")
UNCHECKED_KINDS = ("any", "body", "listing")   # slot kinds that accept any node (listing: instructions in execution order)
FOLDS = ("value", "values", "stack")  # op `fold:` forms (see validate.fold_value)
STORAGE = (True, "through", "writes")   # op `storage:` values
NAN_RESULTS = ("canonical", "payload")  # op/category `nan:` values
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when PyYAML has it: the tables load 10x faster


# ------------------------------------------------------------------ JSON Schema as the tables mean it
# Arg schemas are JSON Schema, run with two readings made explicit: a `pattern` is an
# ECMA-262 regular expression (its `$` matches only at the very end, where Python's would
# also match before a final newline: "gidx0\n" is no SPECIAL name), and `integer` means a
# JSON integer literal (0.0 is a number, not a slot: args reach the evaluator and the
# compilers as they are written).
@lru_cache(maxsize=None)
def ecma_regex(pattern: str):
  if pattern.endswith("$") and not pattern.endswith("\\$"): pattern = pattern[:-1] + r"\Z"
  return re.compile(pattern)


def _pattern(validator, pattern, instance, schema):
  if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
    yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _json_integer(checker, x) -> bool: return type(x) is int


SchemaValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, validators={"pattern": _pattern})
ArgValidator = jsonschema.validators.extend(
  SchemaValidator, type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _json_integer))


def limit_number(v) -> int:
  """A `limits:` value as written in the table: an integer, or a string such as "2**40"."""
  if isinstance(v, int): return v
  base, _, exp = str(v).partition("**")
  return int(base) ** int(exp) if exp else int(base)


@dataclass(frozen=True)
class Slot:
  name: str
  kind: str = "value"          # one of SLOT_KINDS
  dtype: object = None         # group/class/dtype name, or {"same": slot}
  optional: bool = False
  variadic: bool = False
  min_count: int = 0
  level: object = None         # None, a level name, or {op: level} (see level_of)

  def allowed(self) -> frozenset[str] | None:
    """dtype names this slot accepts (None: any, or a `same` relation)."""
    return _allowed(self.dtype if not isinstance(self.dtype, dict) else None)

  @property
  def checked(self) -> bool:
    """Whether the slot constrains its source at all (kinds any and body do not)."""
    return self.kind not in UNCHECKED_KINDS

  def level_of(self, src_op: str) -> str | None:
    """The level a source of op src_op in this slot is checked at, None for the node's own."""
    lv: Any = self.level
    if lv is None or isinstance(lv, str): return lv
    return lv.get(src_op)


@lru_cache(maxsize=None)
def _allowed(d) -> frozenset[str] | None:
  if d is None: return None
  if d in GROUPS: cls = set(GROUPS[d])
  elif d in CLASSES: cls = {d}
  else: return frozenset([d])
  return frozenset(n for n, t in DTYPES.items() if t.cls in cls)


@dataclass
class Check:
  rule: str
  expr: str
  msg: str
  fn: object
  says: object = None   # renders the quantities compared when the check fails (rules.compile_says)


@dataclass
class Op:
  name: str
  category: str
  levels: tuple[str, ...]
  slots: tuple[Slot, ...]
  arg_schema: dict
  semantics: str
  checks: list[Check]
  decomposition: object = None
  conflicts: tuple[str, ...] = ()
  untrusted: bool = False
  example: list | None = None
  family: str | None = None
  fold: str | None = None       # how an index node folds to constant dims (FOLDS), or None
  storage: object = None        # True: storage; "through": passes src[0]'s storage on; "writes": writes into it; None
  nan: str = "payload"          # "canonical": a NaN it computes is the dtype's canonical NaN (decision nan-canonical)
  commutes: frozenset = frozenset()   # dtype classes for which op(a, b) is op(b, a), bit for bit
  derive: tuple = ()            # compiled property rules, in PROPS order
  derive_src: dict = field(default_factory=dict)   # property -> (expr, where it came from)
  derive_all: object = None     # all six rules as one function (src, arg, op, level, node) -> tuple
  checks_all: object = None     # all checks and-ed into one rule function (None: no checks)
  arg_validator: object = None

  min_src: int = 0
  max_src: float = 0
  skeleton_safe: bool = False   # arg validity depends only on the arg's skeleton (see validate._skeleton)
  body_slots: tuple = ()        # positions of `kind: body` slots (closed function bodies)
  level_slots: tuple = ()       # positions of slots with a `level` (they open another level)

  def __post_init__(self):
    self.min_src = sum(1 for s in self.slots if not s.optional and not s.variadic) + sum(s.min_count for s in self.slots if s.variadic)
    self.max_src = float("inf") if any(s.variadic for s in self.slots) else len(self.slots)
    self.body_slots = tuple(k for k, s in enumerate(self.slots) if s.kind == "body")
    self.level_slots = tuple(k for k, s in enumerate(self.slots) if s.level is not None)

  def open_src(self, src: tuple) -> tuple:
    """The sources outside closed function bodies: what a walk collecting or substituting
    PARAMs enters."""
    if not self.body_slots: return src
    return tuple(s for k, s in enumerate(src) if k not in self.body_slots)

  def slot_for(self, i: int) -> Slot:
    if i < len(self.slots) and not self.slots[i].variadic: return self.slots[i]
    return self.slots[-1]

  def arity_text(self) -> str:
    parts = []
    for s in self.slots:
      parts.append(s.name + ("..." if s.variadic else "?" if s.optional else ""))
    return "(" + ", ".join(parts) + ")"


_NUMERIC_KEYWORDS = {"maximum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "const", "enum", "minimum"}


def _skeleton_safe(schema) -> bool:
  """True when the schema constrains numbers only by type and `minimum: 0`, so whether an
  arg is valid depends on its skeleton (structure, strings, bools, number kinds and
  signs) and not on the numbers themselves. Such args are cached by skeleton."""
  def walk(x):
    if isinstance(x, dict):
      for k, v in x.items():
        if k == "minimum" and v != 0: return False
        if k in ("maximum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf"): return False
        if k in ("enum", "const") and any(isinstance(e, (int, float)) and not isinstance(e, bool) for e in (v if isinstance(v, list) else [v])): return False
        if not walk(v): return False
    elif isinstance(x, list):
      return all(walk(v) for v in x)
    return True
  return walk(schema)


class Tables:
  """All of the spec's tables, loaded and compiled. `tables()` gives the shipped ones;
  Tables(ops_path=..., derived_path=...) loads others (e.g. a table with a new op)."""
  _validate_infos: Any = None   # the validator's per-op plans for these tables (tinyspec/validate.py)

  def __init__(self, ops_path: Path | str | None = None, derived_path: Path | str | None = None):
    self.ops_path = Path(ops_path or spec.path("ops.yaml"))
    self.derived_path = Path(derived_path or spec.path("derived.yaml"))
    with open(self.ops_path) as f: self.raw = yaml.load(f, Loader=_SAFE_LOADER)   # noqa: S506 (a safe loader)
    with open(self.derived_path) as f: self.derived = yaml.load(f, Loader=_SAFE_LOADER)   # noqa: S506
    raw = self.raw
    self.levels: dict = raw["levels"]
    self.categories: dict = raw["categories"]
    self.decisions: dict = raw.get("decisions", {})
    self.conflicts: dict = raw.get("conflicts", {})
    self.tolerances: dict = raw.get("tolerances", {})
    self.axis_types: dict = raw.get("axis_types", {})
    self.opt_ops: dict = raw.get("opt_ops", {})
    self.reduce_ops: dict = raw.get("reduce_ops", {})
    self.rule_catalogue: dict = raw.get("rules", {})
    self.io_rules: dict = raw.get("io_rules", {})    # refusals that are not a graph's (paths, memory, time, cache, corpus)
    self.limits: dict = raw.get("limits", {})
    self.limit_values: dict = {k: limit_number(v) for k, v in self.limits.items()}   # tinyspec.limits reads them
    if "max_numel" in self.limits: rules.MAX_NUMEL = self.limit_values["max_numel"]
    if "max_rank" in self.limits: rules.MAX_RANK = self.limit_values["max_rank"]
    self.defs = raw.get("$defs", {})
    self.ops: dict[str, Op] = {}
    families = raw.get("families", {})
    merged_ops = {}
    for name, d in raw["ops"].items():
      d = dict(d)
      fam = d.get("family")
      if fam:
        merged = copy.deepcopy(families[fam]); merged.update(d); d = merged
      merged_ops[name] = (d, fam)
    # rule functions that read the op table (is_storage, params_of) are bound to this one
    self.functions = rules.table_functions(
      storage={n: d.get("storage") for n, (d, _) in merged_ops.items() if d.get("storage") is not None},
      body_slots={n: tuple(k for k, s in enumerate(d.get("src", [])) if s.get("kind") == "body") for n, (d, _) in merged_ops.items()},
      ops=self.ops)   # filled below; call_axis re-derives body nodes with their ops' rules
    for name, (d, fam) in merged_ops.items():
      self.ops[name] = self._make_op(name, d, fam)
    self._check_reduce_ops()
    self._compile_derived()

  # -- reduce ops
  def _check_reduce_ops(self):
    """`reduce_ops:` names exactly the ops REDUCE's arg allows, folds with ops of the table,
    and speaks of dtype classes only."""
    enum = set(self.defs.get("reduce_arg", {}).get("properties", {}).get("op", {}).get("enum", ()))
    if enum and set(self.reduce_ops) != enum:
      raise ValueError(f"reduce_ops: {sorted(self.reduce_ops)} are not the reduce ops $defs.reduce_arg allows ({sorted(enum)})")
    for name, r in self.reduce_ops.items():
      if r.get("fold") not in self.ops: raise ValueError(f"reduce_ops.{name}: fold {r.get('fold')!r} is not an op of the table")
      ident = r.get("identity")
      classes = set(ident) - {"default"} if isinstance(ident, dict) else set()
      bad = (set(r.get("reorders", ())) | classes) - set(CLASSES)
      if bad: raise ValueError(f"reduce_ops.{name}: {sorted(bad)} are not dtype classes ({', '.join(CLASSES)})")

  def reduce_identity(self, op: str, dtype_name: str):
    """What an empty `op` reduction of `dtype_name` gives (decision reduce-empty): a Python
    bool, int or float (-inf for "-inf")."""
    d = _dt(dtype_name)
    v = self.reduce_ops[op]["identity"]
    if isinstance(v, dict): v = v.get(d.cls, v.get("default"))
    if v == "min": return d.min if d.cls != "float" else float("-inf")
    if v == "-inf": return float("-inf")
    if d.cls == "bool": return bool(v)
    return float(v) if d.cls == "float" else int(v)

  def reduce_reorders(self, op: str, dtype_name: str) -> bool:
    """May a backend combine an `op` reduction's elements of `dtype_name` in any order?"""
    return _dt(dtype_name).cls in self.reduce_ops[op].get("reorders", ())

  def reduce_fold(self, op: str) -> str:
    """The binary op that folds an `op` reduction's elements into its accumulator."""
    return self.reduce_ops[op]["fold"]

  # -- ops
  def _make_op(self, name: str, d: dict, fam: str | None) -> Op:
    slots = tuple(self._make_slot(name, s) for s in d.get("src", []))
    if d.get("fold") is not None and d["fold"] not in FOLDS:
      raise ValueError(f"{name}: fold {d['fold']!r} is not one of {', '.join(FOLDS)}")
    if d.get("storage") is not None and d["storage"] not in STORAGE:
      raise ValueError(f"{name}: storage {d['storage']!r} is not true, through or writes")
    if d.get("nan", "payload") not in NAN_RESULTS:
      raise ValueError(f"{name}: nan {d['nan']!r} is not one of {', '.join(NAN_RESULTS)}")
    bad = set(d.get("commutes", ())) - set(CLASSES)
    if bad: raise ValueError(f"{name}: commutes names {sorted(bad)}, not dtype classes ({', '.join(CLASSES)})")
    arg_schema = d.get("arg", {"type": "null"})
    fns = self.functions
    checks = [Check(c["rule"], c["expr"], c["msg"], rules.compile_rule(c["expr"], f"{name}.checks[{c['rule']}]", fns),
                    rules.compile_says(c["says"], f"{name}.checks[{c['rule']}].says", fns) if c.get("says") else None)
              for c in d.get("checks", [])]
    # all checks as one expression: the validator's quick yes (on a no it runs them one by one)
    checks_all = rules.compile_rule(" and ".join(f"({c.expr})" for c in checks), f"{name}.checks", fns) if checks else None
    full = dict(arg_schema); full["$defs"] = self.defs
    validator = ArgValidator(full, format_checker=None)
    return Op(name=name, category=d["category"], levels=tuple(d.get("levels", ("tensor",))), slots=slots, arg_schema=arg_schema,
              semantics=d.get("semantics", ""), checks=checks, decomposition=d.get("decomposition"),
              conflicts=tuple(d.get("conflicts", ())), untrusted=bool(d.get("untrusted")), example=d.get("example"),
              family=fam, arg_validator=validator, skeleton_safe=_skeleton_safe(full), checks_all=checks_all,
              fold=d.get("fold"), storage=d.get("storage"), nan=d.get("nan", self.categories[d["category"]].get("nan", "payload")),
              commutes=frozenset(d.get("commutes", ())))

  def _make_slot(self, op: str, s: dict) -> Slot:
    kind, level = s.get("kind", "value"), s.get("level")
    if kind not in SLOT_KINDS: raise ValueError(f"{op}.{s['name']}: slot kind {kind!r} is not one of {', '.join(SLOT_KINDS)}")
    for lv in ([level] if isinstance(level, str) else (level or {}).values()):
      if lv not in self.levels: raise ValueError(f"{op}.{s['name']}: level {lv!r} is not in `levels:`")
    return Slot(s["name"], kind, s.get("dtype"), bool(s.get("optional")), bool(s.get("variadic")), int(s.get("min_count", 0)),
                dict(level) if isinstance(level, dict) else level)

  # -- derived properties
  def _compile_derived(self):
    dv = self.derived
    cache: dict[str, object] = {}
    combined: dict[tuple, object] = {}

    def comp(expr, where):
      key = str(expr)
      if key not in cache: cache[key] = rules.compile_rule(key, where, self.functions)
      return cache[key]

    for op in self.ops.values():
      fns, srcs = [], {}
      for prop in PROPS:
        expr, origin = None, None
        for r in dv["rules"]:
          if prop in r and op.name in r.get("ops", ()): expr, origin = r[prop], f"ops {op.name}"; break
        if expr is None:
          for r in dv["rules"]:
            if prop in r and r.get("category") == op.category: expr, origin = r[prop], f"category {op.category}"; break
        if expr is None: expr, origin = dv["defaults"][prop], "default"
        srcs[prop] = (str(expr), origin)
        fns.append(comp(expr, f"derived {op.name}.{prop}"))
      op.derive, op.derive_src = tuple(fns), srcs
      exprs = tuple(srcs[p][0] for p in PROPS)
      if exprs not in combined: combined[exprs] = rules.compile_props(PROPS, list(exprs), f"derived {op.name}", self.functions)
      op.derive_all = combined[exprs]

  # -- queries used across the project
  def rule_ids(self) -> set[str]:
    """Every rule id a graph can break: structural ones from the catalogue plus op checks."""
    ids = set(self.rule_catalogue)
    for op in self.ops.values(): ids.update(c.rule for c in op.checks)
    return ids

  def ops_in(self, category: str) -> list[str]:
    return [n for n, o in self.ops.items() if o.category == category]

  # Op facts the passes ask for by kind, never by listing names (one source of truth):
  @cached_property
  def storage_ops(self) -> frozenset:
    """Ops that are storage roots (`storage: true`: BUFFER, PARAM, BUFFER_VIEW ...)."""
    return frozenset(n for n, o in self.ops.items() if o.storage is True)

  @cached_property
  def through_ops(self) -> frozenset:
    """Ops that pass src[0]'s storage on (`storage: through`: INDEX, AFTER, the markers ...)."""
    return frozenset(n for n, o in self.ops.items() if o.storage == "through")

  @cached_property
  def input_ops(self) -> frozenset:
    """Storage roots an input is bound to by their arg's `slot` (BUFFER, PARAM): the nodes
    tinyspec.dispatch.input_name names."""
    def props(schema) -> dict:
      while isinstance(schema, dict) and "$ref" in schema: schema = self.defs[schema["$ref"].split("/")[-1]]
      return schema.get("properties", {}) if isinstance(schema, dict) else {}
    return frozenset(n for n in self.storage_ops if "slot" in props(self.ops[n].arg_schema))

  @cached_property
  def write_ops(self) -> frozenset:
    """Ops that write into the storage their first source names (`storage: writes`: STORE,
    ATOMICADD)."""
    return frozenset(n for n, o in self.ops.items() if o.storage == "writes")

  @cached_property
  def marker_ops(self) -> frozenset:
    """Identity-on-data ops (category marker)."""
    return frozenset(self.ops_in("marker"))

  @cached_property
  def alu_ops(self) -> frozenset:
    """Elementwise ops, primitive and decomposed: what an ALU evaluates."""
    return frozenset(n for n, o in self.ops.items() if o.category in ("elementwise", "decomposed"))

  @cached_property
  def listing_ops(self) -> frozenset:
    """Ops whose sources are instructions listed in execution order (a `kind: listing` slot: LINEAR)."""
    return frozenset(n for n, o in self.ops.items() if any(s.kind == "listing" for s in o.slots))

  def body_slots(self, op: str) -> tuple:
    """The source positions of op's closed function bodies (`kind: body`; () for most ops)."""
    o = self.ops.get(op)
    return o.body_slots if o is not None else ()

  def graph_schema(self) -> dict:
    with open(spec.path("graph.schema.json")) as f: return json.load(f)


@lru_cache(maxsize=None)
def tables() -> Tables:
  """The shipped tables (loaded and compiled once per process)."""
  return Tables()


TABLE_FILES = ("dtypes.yaml", "ops.yaml", "derived.yaml", "decompositions.yaml", "render.yaml")


@lru_cache(maxsize=None)
def tables_version() -> tuple[int, str]:
  """(the `version:` of spec/ops.yaml, sha256 over the text of every table file)."""
  h = hashlib.sha256()
  for name in TABLE_FILES: h.update(spec.path(name).read_bytes())
  with open(spec.path("ops.yaml")) as f:
    version = next((int(line.split(":", 1)[1]) for line in f if line.startswith("version:")), 0)
  return version, h.hexdigest()
