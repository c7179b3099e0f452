"""The tables' element conditions as nodes of tinyspec/errorbound.py's shadow graph: a
tolerance's `domain` (ops.yaml `tolerances`, where the op's accuracy holds) and an allowed
result's `where` (ops.yaml `decisions: ... allowed:`, the elements it covers), both NumPy
syntax over the op's slot names, evaluated in float64.

    inside = Expression(shadow, node, dtype).build(domain)   # a bool node
    e = unconstrained(shadow, i, node, e)                      # inf where a result may be any value

unconstrained() is the whole-graph form of tinyspec/portable.py's `any` result: an element
that an allowed entry with result `any` covers gets bound inf (which then propagates through
every op that reads it, and an output element bound inf is not checked). An element it does
not cover keeps its bound: a wrong result there is still caught. Where an operand is inexact,
the condition is also taken at its interval's ends (v - E, v + E): a backend's operand there
may fall under it (the ranges the conditions test are intervals; an inexact integer operand
already makes an integer result unbounded).
"""
from __future__ import annotations
import ast
import itertools
import operator
from tinyspec import portable as P
from tinyspec.dispatch import Registry
from tinyspec.dtypes import DTYPES

F64, INF = "float64", "inf"
FUNCTION = Registry("condition function", ops=False)   # an expression's functions as graph nodes
# each comparison's op and its value on two numbers (decision comparisons: CMPGE is NOT CMPLT, true with a NaN)
_COMPARE = {ast.Lt: ("CMPLT", operator.lt), ast.Gt: ("CMPGT", lambda a, b: b < a), ast.LtE: ("CMPLE", lambda a, b: not b < a),
            ast.GtE: ("CMPGE", lambda a, b: not a < b), ast.Eq: ("CMPEQ", lambda a, b: not a != b), ast.NotEq: ("CMPNE", operator.ne)}
ANY = "any"


class Expression:
  """A table expression over node n's slot names (each bound to a float64 node: by default
  the operand's value) for result dtype dt, built as graph nodes."""

  def __init__(self, sh, n, dt, names: dict | None = None):
    self.sh, self.n, self.dt = sh, n, dt
    self.slots = [s.name for s in sh.T.ops[n.op].slots]
    self.names = names if names is not None else {name: operand(sh, j) for name, j in zip(self.slots, n.src)}

  def build(self, expr: str) -> int:
    return self.node(ast.parse(expr, mode="eval").body)

  def node(self, t) -> int:
    sh = self.sh
    if isinstance(t, ast.Name): return self.names[t.id] if t.id in self.names else self.dtype_constant(t.id)
    if isinstance(t, ast.Constant): return sh.const(float(t.value))   # type: ignore[arg-type]  # a number: the expressions are the table's
    if isinstance(t, ast.BinOp):
      a, b = self.node(t.left), self.node(t.right)
      ka, kb = constant(sh, a), constant(sh, b)
      if isinstance(t.op, ast.BitAnd) and False in (ka, kb): return sh.const(False, "bool")   # static: no nodes for a case that cannot occur
      if isinstance(t.op, ast.BitOr) and ka is False: return b
      if isinstance(t.op, ast.BitOr) and kb is False: return a
      ops = {ast.BitAnd: "AND", ast.BitOr: "OR", ast.Mult: "MUL", ast.Add: "ADD", ast.Sub: "SUB", ast.Div: "DIV"}
      return sh.add(ops[type(t.op)], (a, b))
    if isinstance(t, ast.Compare) and len(t.ops) == 1:
      a, b = self.node(t.left), self.node(t.comparators[0])
      op = type(t.ops[0])
      if (ka := constant(sh, a)) is not None and (kb := constant(sh, b)) is not None:   # e.g. a shift by a constant: never out of range
        return sh.const(bool(_COMPARE[op][1](ka, kb)), "bool")
      return sh.add(_COMPARE[op][0], (a, b))
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.USub):
      x = self.node(t.operand)
      return sh.const(-constant(sh, x)) if constant(sh, x) is not None else sh.add("NEG", (x,))
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Invert):
      x = self.node(t.operand)
      return sh.const(not constant(sh, x), "bool") if constant(sh, x) is not None else sh.add("CMPNE", (x, sh.const(True, "bool")))
    if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id == "isfloat":   # a static fact of the operand's dtype
      slot = t.args[0].id if isinstance(t.args[0], ast.Name) else None
      src = self.n.src[self.slots.index(slot)] if slot in self.slots[:len(self.n.src)] else None
      return sh.const(src is not None and _cls(sh.views[src].dtype) == "float", "bool")
    if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id in FUNCTION:
      return FUNCTION[t.func.id](sh, self.dt, *[self.node(a) for a in t.args])
    raise ValueError(f"table expression {ast.dump(t)} is not understood")

  def dtype_constant(self, name: str) -> int:
    """The result dtype's figures an allowed entry's `where` names (tinyspec/portable.py where_mask)."""
    d = DTYPES[self.dt]
    figures = {"width": 8 * d.itemsize, "dmin": d.min, "dmax": d.max}
    if name not in figures: raise ValueError(f"table expression name {name!r} is not understood")
    return self.sh.const(float(figures[name]))


def operand(sh, j: int) -> int:
  """Operand j as a float64 node: a constant where its value is one number (index
  arithmetic: a shift or a division by a constant), so a condition on it folds away."""
  v = sh.views[j] if j < len(sh.views) else None
  mm = getattr(v, "min_max", None)
  if v is not None and not v.shape and mm and mm[0] == mm[1] and isinstance(mm[0], (int, float)) and not isinstance(mm[0], bool): return sh.const(float(mm[0]))
  return sh.f64(j)


def constant(sh, k: int):
  """The value of node k where it is a CONST (a number or a bool), else None."""
  n = sh.nodes[k]
  return n.arg.get("value") if n.op == "CONST" and isinstance(n.arg, dict) and isinstance(n.arg.get("value"), (bool, int, float)) else None


def _cls(dt) -> str | None:
  return DTYPES[dt].cls if isinstance(dt, str) and dt in DTYPES else None


@FUNCTION.register("abs")
def _abs(sh, dt: str, x: int) -> int: return sh.abs(x)


@FUNCTION.register("log2")
def _log2(sh, dt: str, x: int) -> int: return sh.add("LOG2", (x,))


@FUNCTION.register("trunc")
def _trunc(sh, dt: str, x: int) -> int: return sh.add("TRUNC", (x,))


@FUNCTION.register("isfinite")
def _isfinite(sh, dt: str, x: int) -> int: return sh.add("CMPLT", (sh.abs(x), sh.const(INF)))


@FUNCTION.register("isnan")
def _isnan(sh, dt: str, x: int) -> int: return sh.add("CMPNE", (x, x))


@FUNCTION.register("isinf")
def _isinf(sh, dt: str, x: int) -> int: return sh.add("CMPEQ", (sh.abs(x), sh.const(INF)))


@FUNCTION.register("normal")
def _normal(sh, dt: str, x: int) -> int:
  lo, hi = DTYPES[dt].normal_range
  a = sh.abs(x)
  return sh.add("AND", (sh.add("CMPGE", (a, sh.const(lo))), sh.add("CMPLE", (a, sh.const(hi)))))


@FUNCTION.register("fits")
def _fits(sh, dt: str, x: int) -> int:
  """x (a float64 node) is a value of dtype dt (false for NaN and inf); a float dtype holds every value."""
  d = DTYPES[dt]
  if d.cls == "float": return sh.const(True, "bool")
  inside = sh.add("AND", (sh.add("CMPGE", (x, sh.const(float(d.min)))), sh.add("CMPLE", (x, sh.const(float(d.max))))))
  return sh.add("AND", (inside, sh.add("CMPEQ", (x, x))))   # NaN is no value of an integer dtype


def any_entries(op: str, arg, dt: str, operand_dtypes) -> list[dict]:
  """The allowed entries with result `any` that apply to a node of op (dtype filter as
  tinyspec/portable.py alternatives: the result's or an operand's dtype)."""
  seen = {dt, *operand_dtypes}
  return [e for _, e in P.entries(op, arg) if ANY in e.get("results", ()) and (not e.get("dtypes") or seen & set(e["dtypes"]))]


def unconstrained(sh, i: int, n, e: int | None) -> int | None:
  """Node i's bound e, inf where an allowed entry lets its result be any value."""
  dt = sh.views[i].dtype
  if not isinstance(dt, str) or dt not in DTYPES: return e
  entries = any_entries(n.op, n.arg, dt, [sh.views[j].dtype for j in n.src])
  if not entries: return e
  slots = [s.name for s in sh.T.ops[n.op].slots]
  choices = []   # per slot: the float64 nodes its value may take (an inexact float: also its interval's ends)
  for j in n.src:
    v, ej = operand(sh, j), sh.e(j)
    choices.append([v] if ej is None or _cls(sh.views[j].dtype) != "float" else [v, sh.add("SUB", (v, ej)), sh.add("ADD", (v, ej))])
  covered = None
  for entry in entries:
    if entry.get("where") is None: return sh.const(INF)
    for combo in itertools.product(*choices):
      m = Expression(sh, n, dt, dict(zip(slots, combo))).build(entry["where"])
      covered = m if covered is None else sh.add("OR", (covered, m))
  assert covered is not None
  if constant(sh, covered) is False: return e
  return sh.add("WHERE", (covered, sh.const(INF), e if e is not None else sh.zero_like(i)))
