"""Arithmetic that tinygrad writes with a meaning of its own (the map table's forms
`trunc_div`, `implicit_cast` and `pow`), written with the spec's ops.

  * `trunc_div`: CDIV/CMOD truncate toward zero, the spec's IDIV/MOD floor: the same op
    where tinygrad's range analysis proves both operands non-negative, else the template.
  * `implicit_cast`: tinygrad's RECIPROCAL of an int divisor (Tensor.div of ints), and its
    SQRT, EXP2, LOG2 and SIN of an int tensor (Tensor.sqrt ... of ints), have a
    float result; its lowering converts the source first. The spec's ops take floats:
    RECIP(CAST(b, float32)), SQRT(CAST(x, float32)).
  * `pow`: a float POW is the map table's template (xpow's definition); an integer POW
    with a constant exponent c >= 0 (the only one tinygrad accepts from `x ** c`) is what
    tinygrad's symbolic rule simplify_pow rewrites it to: square and multiply with the
    integer MUL (which wraps). Any other integer POW tinygrad cannot run: it stays POW,
    which the validator refuses (dtype.allowed), counted in the import report.

Each form is a generator of the importer's walk (interop/tinygrad_import.py): it yields
(source, context) and receives the node index back; cv is the importer's converter.
"""
from __future__ import annotations
import math
from tinyspec.dtypes import dtype as spec_dtype
from tinyspec.interop.tinygrad_contexts import V


def trunc_div(cv, u, ctx):
  """CDIV/CMOD (truncating): the spec's IDIV/MOD where tinygrad proves both operands
  non-negative (floor and truncation agree there), else the op's template."""
  op, dtype = cv.entry(u)["op"], cv.dtype_of(u, ctx)
  a = yield u.src[0], cv.src_ctx(u, 0, op, dtype)
  b = yield u.src[1], cv.src_ctx(u, 1, op, dtype)
  if _vmin(u.src[0]) >= 0 and _vmin(u.src[1]) > 0:
    cv.report.forms[f"{u.op.name} as {op} (operands non-negative)"] += 1
    return cv.add(op, (a, b), None, dtype)
  name = cv.entry(u)["template"]
  cv.report.forms[f"{u.op.name} via template {name}"] += 1
  return cv.template(name, {"A": a, "B": b}, dtype)


def _vmin(u):
  try: return u.vmin
  except Exception: return -math.inf   # noqa: BLE001 (no range known: assume it may be negative)


def implicit_cast(cv, u, ctx):
  """u's op with each source whose dtype differs from u's (a weak one aside) CAST to u's dtype."""
  op, dtype = cv.op_name(u), cv.dtype_of(u, ctx)
  srcs = []
  for k, s in enumerate(u.src):
    x = yield s, cv.src_ctx(u, k, op, dtype)
    if cv.adopt(s, dtype) != V() or cv.dtype_of(s) == dtype: srcs.append(x); continue   # weak: in dtype already
    cv.report.forms[f"{u.op.name} of {cv.dtype_of(s)} as {op}(CAST {dtype})"] += 1
    srcs.append(cv.add("CAST", (x,), dtype, *cv.declared(s, dtype)))
  return cv.add(op, srcs, cv.arg_of(u, dtype), *cv.declared(u, dtype))


def pow_form(cv, u, ctx):
  """POW: floats by the op's template; integers by square and multiply (simplify_pow)."""
  dtype = cv.dtype_of(u, ctx)
  if spec_dtype(dtype).cls == "float": return (yield from cv.template_form(u, ctx))
  exponent = const_int(u.src[1])
  if exponent is None or exponent < 0:
    cv.report.unmapped["POW of integers with an exponent that is not a constant >= 0 (tinygrad runs none)"] += 1
    return (yield from cv.plain_form(u, ctx))
  cv.report.forms["POW of integers as square and multiply"] += 1
  if exponent == 0: return filled(cv, 1, dtype, u)   # x is not read
  x = yield u.src[0], cv.adopt(u.src[0], dtype)
  return _power(cv, x, exponent, dtype, cv.declared(u, dtype))


def _power(cv, x: int, c: int, dtype: str, declared) -> int:
  """x^c for c >= 1 as simplify_pow writes it: y*y*(x if c is odd), y = x^(c//2)."""
  bits = bin(c)[3:]   # the bits after the leading 1, most significant first: square, then multiply where set
  acc = x
  for b in bits:
    acc = cv.add("MUL", (acc, acc), None, *declared)
    if b == "1": acc = cv.add("MUL", (acc, x), None, *declared)
  return acc


def filled(cv, value, dtype: str, like) -> int:
  """A CONST of value (or the string Invalid), at tensor level broadcast to the shape of the UOp like."""
  c = cv.add("CONST", (), {"value": value, "dtype": dtype}) if value == "Invalid" else cv.const(value, dtype)
  if cv.level != "tensor" or not (shape := cv.declared(like, dtype)[1]): return c
  return cv.add("EXPAND", (cv.add("RESHAPE", (c, cv.vshape((1,) * len(shape)))), cv.vshape(shape)), None, *cv.declared(like, dtype))


def const_int(u) -> int | None:
  """The integer a CONST holds, seen through CASTs and the views that broadcast a scalar
  (RESHAPE, EXPAND), else None."""
  while u.op.name in ("CAST", "RESHAPE", "EXPAND") and u.src: u = u.src[0]
  if u.op.name == "CONST" and isinstance(u.arg, int) and not isinstance(u.arg, bool): return int(u.arg)
  return None

