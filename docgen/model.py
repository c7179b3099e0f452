"""What the generated docs say about the spec, computed from a `Tables` object.

spec.md, spec.tex and status.md all render the same facts: which rules constrain an op
(structural ones the validator applies, the op's `checks`, and rules raised by the rule
functions its derived properties call), where each derived property comes from, the
decomposition as a formula, the arg schema in one line, the example with its derived
properties. They are computed here once; the renderers only lay them out. Nothing here
lists op names: adding an op to the YAML documents it.
"""
from __future__ import annotations
import ast
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
import yaml
from tinyspec.dtypes import DTYPES, GROUPS, CLASSES, ALIASES
from tinyspec.graph import from_document
from tinyspec.validate import validate
from tinyspec import spec

# Structural rules the validator itself enforces (tinyspec/validate.py), and which ops
# each can reject, as a predicate on the Op's slots and levels. Catalogue rules not named
# here (file.*, graph.unknown_op) concern the whole file rather than one op; rules raised
# by rule functions are found from derived.yaml `functions:` instead (see rules_of_functions).
STRUCTURAL = {
  "graph.src": lambda T, op: True,
  "graph.arity": lambda T, op: True,
  "arg.schema": lambda T, op: True,
  "slot.kind": lambda T, op: any(s.checked for s in op.slots),
  "shape.operand": lambda T, op: any(s.kind == "shape" for s in op.slots),
  "dtype.allowed": lambda T, op: any(s.allowed() is not None for s in op.slots),
  "dtype.match": lambda T, op: any(isinstance(s.dtype, dict) for s in op.slots),
  "level.op": lambda T, op: set(op.levels) != set(T.levels),
  "declared.dtype": lambda T, op: True,
  "declared.shape": lambda T, op: True,
}

_RULE_MENTION = re.compile(r"\brules? ((?:[A-Za-z_]\w*\.\w+(?:\.\w+)*)(?:(?:,| and| or) [A-Za-z_]\w*\.\w+(?:\.\w+)*)*)")
_RULE_ID = re.compile(r"[A-Za-z_]\w*\.\w+(?:\.\w+)*")


def rule_kind(T, rule_id: str) -> str:
  """structural, check or derived: from the catalogue's `(check)` / `(derived)` marks."""
  text = str(T.rule_catalogue.get(rule_id, ""))
  if text.startswith("(check)"): return "check"
  if text.startswith("(derived)"): return "derived"
  return "structural" if rule_id in T.rule_catalogue else "check"


def rule_text(T, rule_id: str) -> str:
  """The catalogue description without its `(check)` / `(derived)` mark."""
  return re.sub(r"^\((check|derived)\)\s*", "", str(T.rule_catalogue.get(rule_id, "")))


@lru_cache(maxsize=None)
def _called_names(expr: str) -> frozenset:
  """Names of the functions an expression calls, and rule ids passed to require()."""
  try: tree = ast.parse(expr, mode="eval")
  except SyntaxError: return frozenset()
  out = set()
  for n in ast.walk(tree):
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
      out.add(n.func.id)
      if n.func.id == "require" and len(n.args) > 1 and isinstance(n.args[1], ast.Constant): out.add("rule:" + str(n.args[1].value))
  return frozenset(out)


def rules_of_functions(T) -> dict[str, list[str]]:
  """Rule ids each rule-language function can raise, read from its description in
  derived.yaml `functions:` ("... rule shape.broadcast ...")."""
  known = T.rule_ids()
  out = {}
  for fn, text in (T.derived.get("functions") or {}).items():
    ids = []
    for m in _RULE_MENTION.finditer(str(text)):
      ids += [r for r in _RULE_ID.findall(m.group(1)) if r in known and r not in ids]
    out[fn] = ids
  return out


@dataclass
class Constraint:
  rule: str
  kind: str                       # structural | check | derived
  text: str                       # catalogue description
  checks: list = field(default_factory=list)   # [(msg, expr)] from the op's checks
  via: list = field(default_factory=list)      # rule functions that raise it


def constraints(T, op) -> list[Constraint]:
  """Every rule that can reject a node of this op, most specific first: the op's checks
  (table order), rules raised by the functions its rules call, then the structural
  rules the validator applies (catalogue order)."""
  out: dict[str, Constraint] = {}
  def get(rid):
    if rid not in out: out[rid] = Constraint(rid, rule_kind(T, rid), rule_text(T, rid))
    return out[rid]
  for c in op.checks: get(c.rule).checks.append((c.msg, c.expr))
  fn_rules = rules_of_functions(T)
  exprs = [e for e, _ in op.derive_src.values()] + [c.expr for c in op.checks]
  raised: dict[str, list[str]] = {}
  for e in exprs:
    for name in sorted(_called_names(e)):
      if name.startswith("rule:"): raised.setdefault(name[5:], [])
      for rid in fn_rules.get(name, ()):
        if name not in raised.setdefault(rid, []): raised[rid].append(name)
  for rid in sorted(raised, key=lambda r: list(T.rule_catalogue).index(r) if r in T.rule_catalogue else 10**6):
    c = get(rid)
    c.via += [f for f in raised[rid] if f not in c.via]
  for rid in T.rule_catalogue:
    pred = STRUCTURAL.get(rid)
    if pred is not None and pred(T, op): get(rid)
  return list(out.values())


def check_rule_ids(op) -> list[str]:
  """Distinct rule ids of the op's own `checks`, in table order."""
  return list(dict.fromkeys(c.rule for c in op.checks))


# ------------------------------------------------------------------ derived properties
@dataclass
class PropRule:
  prop: str
  expr: str
  origin: str        # op | category | default
  where: str         # "op rule", "category rule (movement)", "default"
  why: list


def derived_rules(T, op) -> list[PropRule]:
  """Per property: the rule expression, where it came from (`Op.derive_src`), and the
  `why` notes of the derived.yaml entries it came from."""
  out = []
  entries = T.derived.get("rules", [])
  for prop, (expr, origin) in op.derive_src.items():
    kind, _, name = origin.partition(" ")
    whys = []
    for e in entries:
      if prop not in e or str(e[prop]) != expr or not e.get("why"): continue
      if (kind == "ops" and name in e.get("ops", ())) or (kind == "category" and e.get("category") == name):
        whys.append(str(e["why"]))
    where = {"ops": "op rule", "category": f"category rule ({name})"}.get(kind, "default")
    out.append(PropRule(prop, expr, {"ops": "op", "category": "category"}.get(kind, "default"), where, whys))
  return out


def op_specific_props(op) -> list[str]:
  return [p for p, (_, origin) in op.derive_src.items() if origin.startswith("ops ")]


# ------------------------------------------------------------------ slots and args
def slot_dtype_text(slot) -> str:
  """A slot's dtype constraint in words: a group with its classes, a class, a dtype."""
  d = slot.dtype
  if isinstance(d, dict) and "same" in d: return f"same as {d['same']}"
  if slot.kind == "shape": return "index"
  if d is None: return "any"
  if d in GROUPS: return f"{d} ({', '.join(GROUPS[d])})"
  return str(d)


def slot_count_text(slot) -> str:
  if slot.variadic: return f"{slot.min_count} or more"
  return "optional" if slot.optional else "1"


def slot_level_text(slot) -> str:
  """The level a slot puts its source at, in words ("" for the node's own)."""
  lv = slot.level
  if lv is None: return ""
  if isinstance(lv, str): return lv
  return ", ".join(f"{level} for a {op}" for op, level in lv.items())


FOLD_TEXT = {"value": "arg.value", "values": "the tuple arg.values", "stack": "the tuple of its sources' folded scalars"}


def op_roles(op) -> list[tuple[str, str]]:
  """(key, meaning) for the op's `storage:` and `fold:` keys in ops.yaml."""
  out = []
  if op.storage is True: out.append(("storage", "yes: a STORE may write it (see `is_storage`)"))
  elif op.storage == "through": out.append(("storage", "through: storage when its src[0] is (see `is_storage`)"))
  elif op.storage == "writes": out.append(("storage", "writes: it writes into the storage its src[0] names"))
  if op.fold: out.append(("folds", f"`{op.fold}`: an `index` node of it holds the constant {FOLD_TEXT.get(op.fold, op.fold)}, so it can be a shape operand"))
  if op.commutes: out.append(("commutes", "op(a, b) is op(b, a), bit for bit, for " + ", ".join(c for c in ("bool", "int", "uint", "index", "float") if c in op.commutes) + " operands"))
  return out


def reduce_op_rows(T) -> list[tuple[str, str, str, str]]:
  """(reduce op, fold op, identity, reorders) of each `reduce_ops:` entry, in words."""
  def ident(v):
    if not isinstance(v, dict): return str(v)
    return "; ".join(f"{'others' if k == 'default' else k}: {'the dtype minimum' if x == 'min' else str(x).lower() if isinstance(x, bool) else x}" for k, x in v.items())
  return [(k, r["fold"], ident(r["identity"]), ", ".join(r.get("reorders", ())) or "none") for k, r in T.reduce_ops.items()]


def folding_ops(T) -> list:
  """The ops with a `fold:` form: the nodes a shape operand can be."""
  return [o for o in T.ops.values() if o.fold]


def signature(op) -> str:
  """OP(a, b?, c...)"""
  return op.name + op.arity_text()


_IDENT = re.compile(r"^\$?[A-Za-z_][A-Za-z0-9_:.\-]*$")   # $name: a decomposition parameter


def _looks_like_literal(s: str) -> bool:
  """Strings that would read as another JSON value unquoted ("true", "nan", "inf")."""
  if s in ("true", "false", "null"): return True
  try: float(s)
  except ValueError: return False
  return True


def compact(v) -> str:
  """A JSON value in short flow style: {slot: 0, dtype: float32}."""
  if isinstance(v, dict): return "{" + ", ".join(f"{k}: {compact(x)}" for k, x in v.items()) + "}"
  if isinstance(v, (list, tuple)): return "[" + ", ".join(compact(x) for x in v) + "]"
  if isinstance(v, bool): return "true" if v else "false"
  if v is None: return "null"
  if isinstance(v, str): return v if _IDENT.match(v) and not _looks_like_literal(v) else json.dumps(v)
  return repr(v)


def schema_text(s, defs: dict, named=None) -> str:
  """A JSON Schema in one line: `{slot: int >= 0, dtype: $dtype, name?: string}`.
  A `$ref` to a def in `named` prints as `$name`; others are written out in place
  (named=None: every def that is not an object prints by name)."""
  if s is True or s == {}: return "any"
  if not isinstance(s, dict): return compact(s)
  if "$ref" in s:
    name = s["$ref"].rsplit("/", 1)[-1]
    d = defs.get(name, {})
    inline = (name not in named) if named is not None else (isinstance(d, dict) and d.get("type") == "object" and bool(d.get("properties")))
    return schema_text(d, defs, named) if inline else f"${name}"
  for key in ("oneOf", "anyOf"):
    if key in s: return " | ".join(schema_text(x, defs, named) for x in s[key])
  if "enum" in s: return " | ".join(compact(x) for x in s["enum"])
  if "const" in s: return compact(s["const"])
  t = s.get("type")
  if isinstance(t, list): return " | ".join(schema_text({**s, "type": x}, defs, named) for x in t)
  if t == "null": return "null"
  if t == "boolean": return "bool"
  if t in ("integer", "number"):
    out = "int" if t == "integer" else "number"
    if "minimum" in s: out += f" >= {s['minimum']}"
    if "maximum" in s: out += f" <= {s['maximum']}"
    return out
  if t == "string":
    out = "string"
    if "pattern" in s: out += f" /{s['pattern']}/"
    if s.get("contentEncoding"): out += f" ({s['contentEncoding']})"
    if "maxLength" in s: out += f" (<= {s['maxLength']} chars)"
    return out
  if t == "array":
    items = schema_text(s.get("items", True), defs, named)
    lo, hi = s.get("minItems"), s.get("maxItems")
    n = f" ({lo}..{hi} items)" if lo is not None and hi is not None else f" (>= {lo} items)" if lo is not None else f" (<= {hi} items)" if hi is not None else ""
    return f"[{items}, ...]{n}"
  if t == "object":
    props = s.get("properties") or {}
    if not props: return "object"
    req = set(s.get("required", ()))
    parts = [f"{k}{'' if k in req else '?'}: {schema_text(v, defs, named)}" for k, v in props.items()]
    if s.get("additionalProperties", True) is not False: parts.append("...")
    return "{" + ", ".join(parts) + "}"
  return compact(s)


def _refs(x, out: dict):
  if isinstance(x, dict):
    if isinstance(x.get("$ref"), str): out[x["$ref"].rsplit("/", 1)[-1]] = out.get(x["$ref"].rsplit("/", 1)[-1], 0) + 1
    for v in x.values(): _refs(v, out)
  elif isinstance(x, list):
    for v in x: _refs(v, out)


def shared_defs(T) -> frozenset:
  """The `$defs` referenced from more than one place (op args and other defs): these
  print as `$name` and are listed once; a def used in one place is written out there."""
  counts: dict[str, int] = {}
  for op in T.ops.values(): _refs(op.arg_schema, counts)
  _refs(T.defs, counts)
  return frozenset(n for n, c in counts.items() if c > 1 and n in T.defs)


def arg_text(T, op) -> str | None:
  """The op's arg schema in one line, None for no arg (schema `null`)."""
  if op.arg_schema == {"type": "null"}: return None
  return schema_text(op.arg_schema, T.defs, shared_defs(T))


def named_arg_types(T) -> list[tuple[str, str]]:
  """The shared `$defs` with their one-line form."""
  named = shared_defs(T)
  return [(n, schema_text(d, T.defs, named - {n})) for n, d in T.defs.items() if n in named]


# ------------------------------------------------------------------ decompositions
def decompositions_file(T) -> dict:
  """spec/decompositions.yaml next to the op table, if there is one ({} otherwise)."""
  p = Path(T.ops_path).parent / "decompositions.yaml"
  return _load_yaml(str(p)) if p.is_file() else {}


@lru_cache(maxsize=None)
def _load_yaml(path: str) -> dict:
  with open(path) as f: d = yaml.safe_load(f)
  return d if isinstance(d, dict) else {}


def template_info(T, name: str) -> dict | None:
  """The named decomposition template: looked up under `templates:` in
  spec/decompositions.yaml (or derived.yaml), or as a top-level key there."""
  for src in (decompositions_file(T), T.derived):
    for d in (src.get("templates") or {}, src):
      t = d.get(name) if isinstance(d, dict) else None
      if isinstance(t, dict): return t
  return None


def template_summary(t: dict | None) -> str:
  """A template's own `summary:` if it has one, else what its structure says: inputs,
  dtypes (and those computed through another), steps, ops and templates used."""
  if not t: return ""
  for k in ("summary", "description", "doc"):
    if isinstance(t.get(k), str): return " ".join(t[k].split())
  parts = []
  if t.get("inputs"): parts.append("inputs " + ", ".join(map(str, t["inputs"])))
  if t.get("outputs"): parts.append("outputs " + ", ".join(map(str, t["outputs"])))
  params = t.get("params") or {}
  if params:
    dts = [f"{k} (computed in {v['compute']})" if isinstance(v, dict) and v.get("compute") else str(k) for k, v in params.items()]
    parts.append("dtypes " + ", ".join(dts))
  steps = t.get("steps") or []
  ops = sorted({str(st["op"]) for st in steps if isinstance(st, dict) and "op" in st})
  uses = sorted({str(st["use"]) for st in steps if isinstance(st, dict) and "use" in st})
  text = f"{len(steps)} steps"
  if ops: text += " over " + ", ".join(ops)
  if any(isinstance(st, dict) and "horner" in st for st in steps): text += ", Horner polynomials"
  if uses: text += "; uses " + ", ".join(uses)
  parts.append(text)
  return "; ".join(parts)


def templates(T) -> dict:
  """The named decomposition templates of spec/decompositions.yaml ({} when absent)."""
  t = decompositions_file(T).get("templates")
  return t if isinstance(t, dict) else {}


def _operand(x, names) -> str:
  if isinstance(x, dict) and "const" in x:
    v = compact(x["const"])
    return f"{v}:{compact(x['dtype'])}" if x.get("dtype") else v
  if isinstance(x, str): return names.get(x, x)
  return compact(x)


def _reads(st) -> list[str]:
  """Names a step reads."""
  out = [x for x in st.get("src", ()) if isinstance(x, str)]
  if isinstance(st.get("x"), str): out.append(st["x"])
  return out


def _step_text(st, names) -> str:
  if "horner" in st:
    coeffs = st["horner"]
    return f"horner({coeffs if isinstance(coeffs, str) else compact(coeffs)}, {names.get(st.get('x'), st.get('x'))})"
  head = str(st.get("use") or st.get("op") or "?")
  arg = st.get("arg")
  if arg is not None: head += _arg_text(arg) if isinstance(arg, dict) else "{" + _arg_text(arg) + "}"
  if st.get("with"): head += "{with " + _arg_text(st["with"])[1:]
  return head + "(" + ", ".join(_operand(x, names) for x in st.get("src", ())) + ")"


def _arg_text(arg) -> str:
  """A step's arg; `$arg.key` means the decomposed node's arg key."""
  def sub(v):
    if isinstance(v, str) and v.startswith("$arg."): return v[1:]
    if isinstance(v, dict): return {k: sub(x) for k, x in v.items()}
    if isinstance(v, list): return [sub(x) for x in v]
    return v
  return compact(sub(arg))


def steps_formula(steps: list, inline: bool = True) -> list[str]:
  """A step list as formulas. With inline, a named value read exactly once is written in
  place (ADD(A, NEG(B))); others stay `name = ...` lines. Names may be redefined (a
  later `as:` shadows an earlier one), so uses are counted per definition."""
  steps = [st for st in steps if isinstance(st, dict)]
  uses: dict[int, int] = {}
  current: dict[str, int] = {}
  for i, st in enumerate(steps):            # count reads of each definition
    for x in _reads(st):
      if x in current: uses[current[x]] = uses.get(current[x], 0) + 1
    for nm in (st["as"] if isinstance(st.get("as"), list) else [st.get("as")]):
      if nm: current[nm] = i
  names: dict[str, str] = {}
  lines = []
  for i, st in enumerate(steps):
    text = _step_text(st, names)
    nm = st.get("as")
    if isinstance(nm, list):
      lines.append(f"{', '.join(nm)} = {text}"); names.update({n: n for n in nm})
    elif nm and (i < len(steps) - 1 or not inline):
      if inline and uses.get(i, 0) == 1: names[nm] = text
      else: lines.append(f"{nm} = {text}"); names[nm] = nm
    else: lines.append(text)
  return lines


@dataclass
class Decomposition:
  formulas: list          # step lists rendered (one line each); empty for a template
  template: str | None    # name of a named template
  summary: str            # what the template computes, when spec/decompositions.yaml says
  defined: bool           # the template is defined somewhere the docs can see


def decomposition(T, op) -> Decomposition | None:
  d = op.decomposition
  if d is None: return None
  if isinstance(d, dict) and "template" in d:
    t = template_info(T, d["template"])
    return Decomposition([], d["template"], template_summary(t), t is not None)
  if isinstance(d, dict) and "steps" in d: d = d["steps"]
  if isinstance(d, list): return Decomposition(steps_formula(d), None, "", True)
  return Decomposition([compact(d)], None, "", True)


# ------------------------------------------------------------------ examples
def fmt_value(v) -> str:
  if v is None: return "null"
  if isinstance(v, tuple): return "(" + ", ".join(fmt_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
  if isinstance(v, float) and v != v: return "nan"
  return str(v)


@dataclass
class ExampleLine:
  index: int
  text: str          # %1 = PARAM(%0) {slot: 0, dtype: float32}
  props: str         # float32 (4,)   ("" when the node did not validate)


@dataclass
class Example:
  lines: list
  errors: list       # diagnostics, formatted, if the example is not valid


def example(T, op) -> Example | None:
  """The op's `example:` graph with each node's derived dtype and shape (validated
  against these tables)."""
  if not op.example: return None
  nodes = op.example
  g, diags = from_document(nodes, f"{op.name}.example")
  res = validate(g, tables=T, file=f"{op.name}.example") if g is not None and not diags else None
  errors = [d.format() for d in (diags + (res.diagnostics if res else []))]
  lines = []
  for i, n in enumerate(nodes if isinstance(nodes, list) else []):
    if not isinstance(n, dict): continue
    text = f"%{i} = {n.get('op')}"
    if n.get("src"): text += "(" + ", ".join(f"%{j}" for j in n["src"]) + ")"
    if n.get("arg") is not None: text += " " + compact(n["arg"])
    v = res.views[i] if res is not None and i < len(res.views) else None
    props = f"{fmt_value(v.dtype)} {fmt_value(v.shape)}" if v is not None else ""
    lines.append(ExampleLine(i, text, props))
  return Example(lines, errors)


# ------------------------------------------------------------------ cross references
def decisions_for(T, op) -> list[str]:
  return [k for k, d in T.decisions.items() if op.name in (d.get("ops") or ())]


def ops_by_category(T) -> list[tuple[str, dict, list]]:
  """(category, its title/note, its ops in table order), in `categories:` order; ops of
  a category missing from `categories:` come last under their own name."""
  cats = list(T.categories) + sorted({o.category for o in T.ops.values()} - set(T.categories))
  return [(c, T.categories.get(c) or {"title": c, "note": ""}, [o for o in T.ops.values() if o.category == c]) for c in cats]


def ops_for_rule(T) -> dict[str, list[str]]:
  """rule id -> ops that rule can reject (ops in table order)."""
  out: dict[str, list[str]] = {r: [] for r in T.rule_catalogue}
  for op in T.ops.values():
    for c in constraints(T, op): out.setdefault(c.rule, []).append(op.name)
  return out


def dtype_rows() -> list[dict]:
  return [{"name": n, "class": d.cls, "itemsize": d.itemsize, "min": d.min, "max": d.max, "c": d.c, "cl": d.cl} for n, d in DTYPES.items()]


def dtype_classes() -> dict: return dict(CLASSES)
def dtype_groups() -> dict: return dict(GROUPS)
def dtype_aliases() -> dict: return dict(ALIASES)


# ------------------------------------------------------------------ tolerances
# The `tolerances:` keys, in reading order, with the column titles the docs give them.
TOLERANCE_COLUMNS = [("ulp", "Strict ulp"), ("portable_ulp", "Portable ulp"), ("decomposed_ulp", "Decomposed ulp"),
                     ("ulp_per_element", "Per element"), ("domain", "Domain"), ("decomposed_domain", "Decomposed domain")]


def tolerance_columns(T) -> list[tuple[str, str]]:
  """(key, title) for every key some tolerance entry uses: the known ones first, in order."""
  used = {k for t in T.tolerances.values() if isinstance(t, dict) for k in t}
  known = [(k, title) for k, title in TOLERANCE_COLUMNS if k in used]
  return known + [(k, k.replace("_", " ").capitalize()) for k in sorted(used - {k for k, _ in TOLERANCE_COLUMNS})]


def tolerance_text(v) -> str:
  """One tolerance value as prose: a number or an expression as is; per dtype, the dtypes
  that share a value grouped (`float16, bfloat16: 1; float32: 3`); never a Python repr."""
  if isinstance(v, dict):
    groups: dict = {}
    for dt, x in v.items(): groups.setdefault(tolerance_text(x), []).append(str(dt))
    return "; ".join(f"{dtype_list(dts)}: {x}" for x, dts in groups.items())
  if isinstance(v, (list, tuple)): return ", ".join(tolerance_text(x) for x in v)
  return "" if v is None else str(v)


def dtype_list(names: list[str]) -> str:
  """Dtype names, comma-separated; several that share the prefix before an underscore are
  written once, their suffixes in braces (`float8_{e4m3, e5m2}`), so a narrow column holds them."""
  by_prefix: dict = {}
  for n in names:
    head, sep, tail = n.partition("_")
    by_prefix.setdefault(head + sep if sep else n, []).append(tail)   # "float8_" apart from a dtype "float8"
  out = []
  for head, tails in by_prefix.items():
    if not head.endswith("_"): out.append(head)
    elif len(tails) == 1: out.append(head + tails[0])
    else: out.append(f"{head}{{{', '.join(tails)}}}")
  return ", ".join(out)


# ------------------------------------------------------------------ sources
@dataclass
class Source:
  id: str       # how the tables cite it (basis: seed001, the conflicts' columns)
  name: str     # how prose names it ("the Dialect document")
  title: str
  what: str


def sources(T) -> dict[str, Source]:
  """spec/sources.yaml next to the op table: the documents the spec was written from."""
  p = Path(T.ops_path).parent / "sources.yaml"
  if not p.is_file():   # a table elsewhere (a test's): the shipped sources
    p = spec.path("sources.yaml")
  raw = (_load_yaml(str(p)) if p.is_file() else {}).get("sources") or {}
  return {k: Source(k, v["name"], v["title"], " ".join(str(v.get("what", "")).split())) for k, v in raw.items()}


def source_name(T, sid: str, capital: bool = False) -> str:
  """A source id as prose (`seed001` -> "the Dialect document"); an unknown id as is."""
  s = sources(T).get(sid)
  name = s.name if s else sid
  return name[:1].upper() + name[1:] if capital else name
