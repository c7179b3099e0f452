"""case.json checked against spec/case.schema.json, fast.

The corpus has over a thousand cases, read at every conformance run: jsonschema's
validator takes about 2 ms a case, this walk a few µs. It reads the schema itself (one
source of truth) and knows the keywords the schema uses: type, const, enum, properties,
required, additionalProperties, items, prefixItems, minItems, maxItems, anyOf, $ref,
minimum, minLength, maxLength, pattern. A keyword it does not know fails at load, so the
schema cannot grow past it unnoticed; tests/conformance/test_hostile_cases.py checks
that it and jsonschema accept and refuse the same documents.
"""
from __future__ import annotations
import json
import re
from functools import lru_cache
from tinyspec import spec
from tinyspec.dtypes import DTYPES

KNOWN = {"$schema", "$id", "$defs", "$ref", "title", "description", "type", "const", "enum", "properties", "required",
         "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "anyOf", "minimum", "minLength",
         "maxLength", "pattern"}
TYPES = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list), "string": lambda v: isinstance(v, str),
         "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
         "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "boolean": lambda v: isinstance(v, bool),
         "null": lambda v: v is None}


class Mismatch(ValueError):
  """The first place a document departs from the schema: `where` (a dotted path) and why."""
  def __init__(self, where: list, why: str):
    self.where = ".".join(str(p)[:40] for p in where) or "the case"
    super().__init__(f"{self.where}: {why}")


@lru_cache(maxsize=None)
def case_schema() -> dict:
  """spec/case.schema.json with its dtype list filled in from the tables (spec/dtypes.yaml)."""
  schema = json.loads(spec.path("case.schema.json").read_text())
  schema["$defs"]["dtype"] = {"enum": sorted(DTYPES)}
  _known(schema)
  return schema


def _known(s) -> None:
  if isinstance(s, dict):
    unknown = set(s) - KNOWN
    if unknown: raise NotImplementedError(f"case.schema.json uses {sorted(unknown)}: teach conformance/corpus/caseschema.py")
    for k, v in s.items():
      if k in ("properties", "$defs"): [_known(x) for x in v.values()]
      elif k in ("items", "additionalProperties"): _known(v)
      elif k in ("prefixItems", "anyOf"): [_known(x) for x in v]


def check(doc) -> None:
  """Raise Mismatch where doc departs from spec/case.schema.json."""
  _validator()(doc, ())


@lru_cache(maxsize=None)
def _validator():
  schema = case_schema()
  return _compile(schema, schema, {})


def _compile(s, root: dict, done: dict):
  """A function (value, where) that raises Mismatch where value departs from schema s;
  `where` is the path as nested pairs (built into a string only for a message)."""
  if s is True: return lambda v, where: None
  if "$ref" in s:
    ref = s["$ref"]
    if ref not in done:
      done[ref] = None
      done[ref] = _compile(_resolve(root, ref), root, done)
    return lambda v, where: done[ref](v, where)
  steps = []
  if "type" in s:
    ok, kind = TYPES[s["type"]], _a(s["type"])
    steps.append(lambda v, where: ok(v) or _fail(where, f"{_short(v)} is not {kind}"))
  for key in ("const", "enum"):
    if key in s:
      allowed = {_key(e) for e in ([s[key]] if key == "const" else s[key])}
      told = _short(s[key]) if key == "const" else "one of " + ", ".join(map(_short, s[key]))
      steps.append(lambda v, where, allowed=allowed, told=told: _key(v) in allowed or _fail(where, f"{_short(v)} is not {told}"[:300]))
  if "anyOf" in s:
    options, told = [_compile(x, root, done) for x in s["anyOf"]], "; ".join(_describe(x, root) for x in s["anyOf"])
    steps.append(lambda v, where: any(_fits(f, v) for f in options) or _fail(where, f"{_short(v)} is none of: {told}"))
  if any(k in s for k in ("minLength", "maxLength", "pattern")):
    lo, hi, pat = s.get("minLength", 0), s.get("maxLength"), re.compile(s["pattern"]) if "pattern" in s else None
    def string(v, where):
      if not isinstance(v, str): return
      if len(v) < lo: _fail(where, f"{_short(v)} is shorter than {lo}")
      if hi is not None and len(v) > hi: _fail(where, f"{_short(v)} is longer than {hi}")
      if pat is not None and not pat.search(v): _fail(where, f"{_short(v)} does not match {pat.pattern}")
    steps.append(string)
  if "minimum" in s:
    least = s["minimum"]
    steps.append(lambda v, where: not TYPES["number"](v) or v >= least or _fail(where, f"{_short(v)} is below {least}"))
  if any(k in s for k in ("properties", "required", "additionalProperties")): steps.append(_object(s, root, done))
  if any(k in s for k in ("items", "prefixItems", "minItems", "maxItems")): steps.append(_array(s, root, done))
  def run(v, where):
    for f in steps: f(v, where)
  return run


def _object(s, root, done):
  required = s.get("required", ())
  props = {k: _compile(x, root, done) for k, x in s.get("properties", {}).items()}
  extra = s.get("additionalProperties", True)
  other = None if extra is False else _compile(extra, root, done)
  def obj(v, where):
    if not isinstance(v, dict): return
    for k in required:
      if k not in v: _fail(where, f"{k!r} is missing")
    for k, x in v.items():
      f = props.get(k, other)
      if f is None: _fail(where, f"unknown field {_short(k)}")
      f(x, (where, k))
  return obj


def _array(s, root, done):
  lo, hi = s.get("minItems", 0), s.get("maxItems")
  first = [_compile(x, root, done) for x in s.get("prefixItems", [])]
  rest = _compile(s.get("items", True), root, done)
  def arr(v, where):
    if not isinstance(v, list): return
    if len(v) < lo: _fail(where, f"{len(v)} items, fewer than {lo}")
    if hi is not None and len(v) > hi: _fail(where, f"{len(v)} items, more than {hi}")
    for i, x in enumerate(v): (first[i] if i < len(first) else rest)(x, (where, i))
  return arr


def _fail(where, why: str):
  path = []
  while where:
    where, part = where
    path.append(part)
  raise Mismatch(path[::-1], why)


def _short(v) -> str:
  text = json.dumps(v) if not isinstance(v, float) or v == v else "NaN"
  return text if len(text) <= 60 else text[:57] + "..."


def _fits(f, v) -> bool:
  try: f(v, ())
  except Mismatch: return False
  return True


def _key(v):
  """What makes two JSON values equal for const and enum: 1 == 1.0, true != 1."""
  if isinstance(v, bool) or v is None: return ("literal", v)
  if isinstance(v, (int, float)): return ("number", v)
  if isinstance(v, str): return ("string", v)
  return ("json", json.dumps(v, sort_keys=True))


def _resolve(root: dict, ref: str) -> dict:
  node = root
  for part in ref.removeprefix("#/").split("/"): node = node[part]
  return node


def _describe(s, root) -> str:
  if "$ref" in s: s = _resolve(root, s["$ref"])
  if "anyOf" in s: return " or ".join(_describe(x, root) for x in s["anyOf"])
  if "type" in s: return _a(s["type"]) + (f" >= {s['minimum']}" if "minimum" in s else "")
  return "as the schema says"


def _a(kind: str) -> str:
  return {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer", "number": "a number",
          "boolean": "true or false", "null": "null"}[kind]
