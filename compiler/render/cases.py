"""What a node renders as: the render.yaml case chosen for it (per target, device kind,
dtype and interval predicate), and the target's text for types and literals."""
from __future__ import annotations
import math
import re
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec import intervals as iv
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.rendertables import render_tables

TARGETS = ("c", "opencl")
DTYPE_FIELD = {"c": "c", "opencl": "cl"}     # spec/dtypes.yaml's field naming a dtype's type on the target
_WIDE_SUFFIX = {"c": "LL", "opencl": "L"}     # an integer literal's suffix where render.yaml gives none
_FIELD = re.compile(r"\{([A-Za-z_]+)\}")


def fill(template: str, fields: dict) -> str:
  """Replace the {NAME} fields a template uses (C braces and unknown names stay as they are)."""
  return _FIELD.sub(lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)


def value_type(dt: str, target: str) -> str:
  d = render_tables()["dtypes"].get(dt, {})
  if "value" in d: return d["value"][target]
  return getattr(_dt(dt), DTYPE_FIELD[target])


def storage_type(dt: str, target: str) -> str:
  d = render_tables()["dtypes"].get(dt, {})
  if "storage" in d: return d["storage"][target]
  return getattr(_dt(dt), DTYPE_FIELD[target])


def utype(bits: int) -> str: return f"uint{bits}_t"


def literal(value, dt: str, target: str) -> str:
  """A constant of dtype dt as source text (exact: floats round-trip, wide ints suffixed)."""
  d = _dt(dt)
  if d.cls == "bool": return "true" if value else "false"
  if d.cls == "float":
    v = float(value) if not isinstance(value, str) else float(value)
    # NAN/INFINITY are float constants in OpenCL C: a double one is cast (exact for inf/nan)
    cast = "(double)" if value_type(dt, target) == "double" else ""
    if math.isnan(v): return f"({cast}NAN)" if cast else "NAN"
    if math.isinf(v): return (f"({cast}INFINITY)" if v > 0 else f"(-{cast}INFINITY)") if cast else ("INFINITY" if v > 0 else "(-INFINITY)")
    text = repr(v)
    if "e" not in text and "." not in text and "inf" not in text: text += ".0"
    if value_type(dt, target) == "float": text += "f"
    return f"({text})" if text.startswith("-") else text
  v = int(value)
  if not d.min <= v <= d.max: raise CompileError("compile.form", f"the literal {v} is not a value of {dt}")   # C would truncate it
  suffixes = render_tables()["targets"][target]["literal_suffix"]
  # a literal has its dtype's C type: a bare 0 is an int, and `0 >> 32` on it is undefined
  # even where the dtype is 64 bits wide (narrower dtypes promote to int like their values)
  if -2**31 < v < 2**31 and dt not in suffixes: return f"({v})" if v < 0 else str(v)
  suffix = suffixes.get(dt, _WIDE_SUFFIX[target])
  if v == -2**63: return f"(-9223372036854775807{suffix} - 1)"
  if d.cls == "uint": suffix = suffix if suffix.startswith("U") else "U" + suffix
  return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"


# the intervals of the ops render.yaml renders plainly `if: exact` (tinyspec/intervals.py;
# dtype None: unbounded, so that the result shows whether the op wraps)
_EXACT = {"ADD": iv.iv_add, "SUB": iv.iv_sub, "MUL": iv.iv_mul, "NEG": lambda a, name: iv.iv_sub(iv.iv_zero(name), a, name)}


def _exact_iv(u: UOp):
  """The exact interval of an integer ADD/SUB/MUL/NEG from its sources'."""
  ivs = [props(s).min_max for s in u.src]
  if any(i is None for i in ivs) or u.op not in _EXACT: return None
  return _EXACT[u.op](*ivs, None)


def _pred_exact(u):
  iv = _exact_iv(u)
  d = _dt(props(u).dtype)
  return iv is not None and d.min <= iv[0] and iv[1] <= d.max


def _pred_div_plain(u):
  (alo, _), (blo, _) = props(u.src[0]).min_max, props(u.src[1]).min_max
  return alo >= 0 and blo >= 1


def _pred_shl_plain(u):
  blo, bhi = props(u.src[1]).min_max
  return 0 <= blo and bhi < _dt(props(u).dtype).bits


def _pred_shift_plain(u):
  return _pred_shl_plain(u) and (_dt(props(u).dtype).cls == "uint" or props(u.src[0]).min_max[0] >= 0)


PREDICATES = {"exact": _pred_exact, "div_plain": _pred_div_plain, "shl_plain": _pred_shl_plain, "shift_plain": _pred_shift_plain}


def matches(sel, dt: str) -> bool:
  return sel is None or dt in sel or _dt(dt).cls in sel


def select_case(u: UOp, target: str, kind: str | None = None):
  """The render.yaml case for node u on target (and a device of that kind), or None."""
  if u.op not in render_tables()["ops"]: return None
  out = props(u).dtype
  src = props(u.src[0]).dtype if u.src else out
  for case in _dtype_cases(u.op, out, src, target, kind):
    if "if" in case and not PREDICATES[case["if"]](u): continue
    return case
  return None


_CASES: dict = {}


def _dtype_cases(op: str, out, src, target: str, kind: str | None = None) -> list:
  """The cases of op whose target, device kind and dtype conditions hold (the `if`
  predicates are the node's own business). kind None: any device kind."""
  key = (op, out, src, target, kind)
  r = _CASES.get(key)
  if r is None:
    r = _CASES[key] = [c for c in render_tables()["ops"][op] if c.get("target", target) == target
                       and (kind is None or kind in c.get("kinds", (kind,)))
                       and matches(c.get("class"), src if c.get("on") == "src" else out)
                       and matches(c.get("from"), src) and matches(c.get("to"), out)]
  return r


