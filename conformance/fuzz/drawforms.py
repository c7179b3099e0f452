"""How the strategies (graphs.py) draw what an op's checks constrain: the named draw forms
of strategies.yaml for shape operands (SHAPE_FORM: reshape, expand, pad, shrink) and args
(ARG_FORM: permutation, flags, axes, reduce), and for any other arg a value of its JSON
Schema (from_schema). `hints()` is strategies.yaml itself.

    SHAPE_FORM[name](data, source shape) -> [the op's shape operands]
    ARG_FORM[name](data, op, source views, tables) -> the arg
"""
from __future__ import annotations
from functools import lru_cache
from pathlib import Path
import numpy as np
import yaml
from hypothesis import strategies as st
from tinyspec.dispatch import Registry

HINTS_FILE = Path(__file__).resolve().parent / "strategies.yaml"
MAX_DIM = 4   # the dims EXPAND draws for a size-1 axis
SHAPE_FORM = Registry("shape draw form", ops=False)
ARG_FORM = Registry("arg draw form", ops=False)


@lru_cache(maxsize=None)
def hints() -> dict:
  return yaml.safe_load(HINTS_FILE.read_text())


@SHAPE_FORM.register("reshape")
def _reshape(data, src: tuple) -> list[tuple]:
  n = int(np.prod(src)) if src else 1
  cands = [(n,), (1, n), (n, 1)] + [(f, n // f) for f in range(2, n) if n % f == 0] + ([()] if n == 1 else [])
  return [data.draw(st.sampled_from(cands))]


@SHAPE_FORM.register("expand")
def _expand(data, src: tuple) -> list[tuple]:
  return [tuple(data.draw(st.integers(0, MAX_DIM)) if d == 1 else d for d in src)]


@SHAPE_FORM.register("pad")
def _pad(data, src: tuple) -> list[tuple]:
  o = tuple(data.draw(st.integers(0, 2)) for _ in src)
  return [o, tuple(d + k + data.draw(st.integers(0, 2)) for d, k in zip(src, o))]


@SHAPE_FORM.register("shrink")
def _shrink(data, src: tuple) -> list[tuple]:
  o = tuple(data.draw(st.integers(0, d)) for d in src)
  return [o, tuple(data.draw(st.integers(0, d - k)) for d, k in zip(src, o))]


def _axes(data, rank: int) -> list[int]:
  return sorted(data.draw(st.sets(st.integers(0, rank - 1), max_size=rank))) if rank else []


@ARG_FORM.register("permutation")
def _arg_permutation(data, op, src_views, T): return list(data.draw(st.permutations(range(len(src_views[0].shape)))))


@ARG_FORM.register("flags")
def _arg_flags(data, op, src_views, T): return [data.draw(st.booleans()) for _ in src_views[0].shape]


@ARG_FORM.register("axes")
def _arg_axes(data, op, src_views, T): return _axes(data, len(src_views[0].shape))


@ARG_FORM.register("reduce")
def _arg_reduce(data, op, src_views, T):
  ops = _schema_enum(T, T.ops[op].arg_schema, "op")
  if src_views[0].dtype == "bool": ops = [o for o in ops if o == "MAX"] or ops   # ADD/MUL take numbers (check dtype.allowed)
  return {"op": data.draw(st.sampled_from(ops)), "axes": _axes(data, len(src_views[0].shape))}


def _resolve(T, schema):
  while isinstance(schema, dict) and "$ref" in schema:
    schema = T.defs[schema["$ref"].split("/")[-1]]
  return schema


def _schema_enum(T, schema, prop) -> list:
  s = _resolve(T, schema)
  return list(_resolve(T, s.get("properties", {}).get(prop, {})).get("enum", []))


def from_schema(data, T, schema, depth: int = 0):
  """A value that matches a JSON Schema (the subset the arg schemas use)."""
  s = _resolve(T, schema)
  if not isinstance(s, dict) or depth > 4: return None
  for key in ("oneOf", "anyOf"):
    if key in s: return from_schema(data, T, data.draw(st.sampled_from(s[key])), depth + 1)
  if "enum" in s: return data.draw(st.sampled_from(s["enum"]))
  t = s.get("type")
  if t == "null": return None
  if t == "boolean": return data.draw(st.booleans())
  if t == "integer":
    lo = s.get("minimum", 0)
    return data.draw(st.integers(lo, lo + 3))
  if t == "number": return data.draw(st.integers(0, 3))
  if t == "string":
    if "pattern" in s: return data.draw(st.from_regex(s["pattern"], fullmatch=True))
    return data.draw(st.sampled_from(["a", "CPU"]))
  if t == "array": return [from_schema(data, T, s.get("items", {}), depth + 1) for _ in range(data.draw(st.integers(0, 3)))]
  if t == "object":
    props = s.get("properties", {})
    out = {}
    for k in props:
      if k in s.get("required", []) or data.draw(st.booleans()): out[k] = from_schema(data, T, props[k], depth + 1)
    return out
  return None


def draw_arg(data, op: str, src_views, T):
  """op's arg: sampled from strategies.yaml `args`, drawn by its `arg` form, else from its schema."""
  h = hints().get("ops", {}).get(op, {})
  if "args" in h: return data.draw(st.sampled_from(h["args"]))
  if "arg" in h: return ARG_FORM[h["arg"]](data, op, src_views, T)
  return from_schema(data, T, T.ops[op].arg_schema)


def draw_shapes(data, op: str, src: tuple) -> list[tuple] | None:
  """All of op's shape operands by its strategies.yaml `shapes` form (src: its first
  source's shape), or None where it has none."""
  form = hints().get("ops", {}).get(op, {}).get("shapes")
  return SHAPE_FORM[form](data, src) if form else None
