"""The rule language of spec/derived.yaml and of the `checks` in spec/ops.yaml.

A rule is a restricted Python expression. It is parsed with `ast`, every node is checked
against a whitelist (no dunder attributes, no lambdas, no calls except to FUNCTIONS
below), and then compiled once into an ordinary Python function, so evaluating a rule
costs one call. `require(cond, rule, msg)` and the shape helpers raise RuleFail, which
the validator reports against the node with the rule id.
"""
from __future__ import annotations
import ast
import base64
import binascii
import copy
import math
from tinyspec import intervals as iv
from tinyspec.dtypes import dtype as _dt


class RuleFail(Exception):
  """A node breaks rule `rule`."""
  def __init__(self, rule: str, msg: str):
    super().__init__(msg)
    self.rule, self.msg = rule, msg


class RuleSyntaxError(Exception):
  pass


# ------------------------------------------------------------------ functions in scope
MAX_NUMEL = 1 << 40   # overridden from ops.yaml `limits` by the tables loader
MAX_RANK = 64


def require(cond, rule, msg):
  if not cond: raise RuleFail(rule, msg)
  return True


def numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


def shape_value(v):
  """Dims held by a shape operand."""
  if v.dtype != "index":
    raise RuleFail("shape.operand", f"a shape operand must have dtype index, not {v.dtype} (node {v.index}, {v.op})")
  dims = v.value
  if dims is None:
    raise RuleFail("shape.operand", f"shape operand node {v.index} ({v.op}) is not a constant index vector")
  if type(dims) is not tuple: dims = (dims,)
  if len(v.shape) > 1:
    raise RuleFail("shape.operand", f"a shape operand must be ()- or (k,)-shaped, node {v.index} has shape {v.shape}")
  if len(dims) > MAX_RANK:
    raise RuleFail("shape.limit", f"a shape of {len(dims)} dims, more than limits.max_rank = {MAX_RANK}")
  n = 1
  for d in dims:
    if d < 0: raise RuleFail("shape.operand", f"negative dim in shape {dims}"[:300])
    if n <= MAX_NUMEL: n *= d   # past the limit only a 0 dim matters (no huge products)
  if n > MAX_NUMEL and 0 not in dims:
    raise RuleFail("shape.limit", f"shape {_short(dims)} has more than {MAX_NUMEL} elements (limits.max_numel)")
  return dims   # index constants are ints (rule CONST.value)


def _short(dims, n: int = 8) -> str:
  """A shape for a message: the first dims only (a message stays short whatever the shape)."""
  return str(tuple(dims)) if len(dims) <= n else "(" + ", ".join(map(str, dims[:n])) + f", ... {len(dims) - n} more)"


def broadcast(*shapes):
  if len(shapes) == 2:   # the common cases first
    a, b = shapes
    if a == b or not b: return a
    if not a: return b
  elif len(shapes) == 1: return shapes[0]
  else:
    big = [s for s in shapes if s]   # ()-shaped sources broadcast to anything
    if not big: return ()
    if big.count(big[0]) == len(big): return big[0]
    shapes = big
  nd = max((len(s) for s in shapes), default=0)
  out = []
  for k in range(nd):
    dims = {s[len(s) - nd + k] for s in shapes if len(s) - nd + k >= 0}
    big = dims - {1}
    if len(big) > 1:
      raise RuleFail("shape.broadcast", "shapes " + ", ".join(str(tuple(s)) for s in shapes) + " do not broadcast")
    out.append(big.pop() if big else 1)
  return tuple(out)


def collapse(shape, axes):
  return tuple(1 if i in axes else d for i, d in enumerate(shape))


def index_shape(src):
  out = ()
  for i in src[1:]: out += tuple(i.shape)
  return out + tuple(src[0].shape[len(src) - 1:])


def index_axis(src):
  a, n = src[0].axis, len(src) - 1
  if a is None or a < n: return None
  return a - n + sum(len(i.shape) for i in src[1:])


def device_of(d):
  if isinstance(d, (list, tuple)): return tuple(d)
  return d


def is_multi(d) -> bool: return isinstance(d, tuple)


def first_device(src):
  dev = None
  for s in src:
    if s.device is None: continue
    if dev is None: dev = s.device
    elif s.device != dev:
      raise RuleFail("device.match", f"sources are on different devices: {dev} and {s.device}")
  return dev


def inherit_axis(src):
  ax = None
  for s in src:
    if s.axis is None: continue
    if ax is None: ax = s.axis
    elif s.axis != ax:
      raise RuleFail("axis.match", f"sources are sharded on different axes: {ax} and {s.axis}")
  return ax


def reshape_axis(old, new, axis, device):
  if axis is None: return None
  n = len(device) if is_multi(device) else 1
  pre = numel(old[:axis])
  p = 1
  for k, d in enumerate(new):
    if p == pre and d % n == 0 and d >= n: return k
    p *= d
    if p > pre: break
  raise RuleFail("RESHAPE.shard", f"reshape {tuple(old)} -> {tuple(new)} splits the shard axis {axis} across {n} devices")


def is_tuple(v) -> bool: return isinstance(v.dtype, tuple)


def _open_postorder(root, bodies: dict) -> list:
  """The nodes below root, sources first, not entering nested bodies (bodies: op -> the
  positions of its `kind: body` slots); iterative, for graphs of any depth."""
  order, seen, stack = [], set(), [(root, False)]
  while stack:
    v, done = stack.pop()
    if done: order.append(v); continue
    if id(v) in seen: continue
    seen.add(id(v))
    stack.append((v, True))
    skip = bodies.get(v.op, ())
    stack.extend((s, False) for k, s in enumerate(v.src) if k not in skip and id(s) not in seen)
  return order


def table_functions(storage: dict, body_slots: dict, ops: dict | None = None) -> dict:
  """The rule functions that read the op table, bound to one table's data:
  storage: op -> its `storage:` value (True or "through"); body_slots: op -> positions of
  its `kind: body` slots; ops: name -> compiled Op (its `derive_all`), for call_axis. The
  Tables loader compiles every rule with these."""
  roots = frozenset(n for n, s in storage.items() if s is True)
  through = frozenset(n for n, s in storage.items() if s == "through")
  bodies = {n: frozenset(k) for n, k in body_slots.items() if k}

  def under_through(v):   # the node below v's chain of INDEX/AFTER/markers (`storage: through`)
    while v.op in through and v.src: v = v.src[0]
    return v

  def is_storage(v) -> bool: return under_through(v).op in roots

  def storage_root(v): return v if (v := under_through(v)).op in roots else None

  def after_min_max(src):
    """AFTER(buf, deps...): buf's interval joined with every value its deps store into
    the same storage (through STOREs, and the END/GROUP/BARRIER/IF chains around them);
    the dtype range where a dep may write it otherwise (ATOMICADD, a CALL, a view)."""
    root = storage_root(src[0])
    mm = src[0].min_max
    if root is None or mm is None: return mm
    seen, stack = set(), list(src[1:])
    while stack:
      v = stack.pop()
      if id(v) in seen: continue
      seen.add(id(v))
      if v.op == "STORE":
        if storage_root(v.src[0]) is root:
          if v.src[1].dtype != src[0].dtype or v.src[1].min_max is None: return iv.dtype_range(src[0].dtype)
          mm = iv.iv_hull(mm, v.src[1].min_max)
      elif v.op in ("ATOMICADD", "CALL"): return iv.dtype_range(src[0].dtype)
      elif v.dtype == "void": stack.extend(v.src)
    return mm

  def params_of(body):
    """PARAM views used by a function body, not entering nested bodies (they bind their own)."""
    seen, out, stack = set(), [], [body]
    while stack:
      v = stack.pop()
      if id(v) in seen: continue
      seen.add(id(v))
      if v.op == "PARAM": out.append(v); continue
      skip = bodies.get(v.op)
      stack.extend(v.src if skip is None else [s for k, s in enumerate(v.src) if k not in skip])
    return out

  def call_axis(src, level):
    """FUNCTION/CALL: the shard axes of the body's tuple, each PARAM k standing for
    argument k. A body is derived once, for its PARAMs (which carry no device in a traced
    function); where an argument's axis differs from its PARAM's, the nodes between the
    PARAMs and the body are derived again over the arguments (a RuleFail there means the
    call, inlined, would break that rule)."""
    body, args = src[0], src[1:]
    if not isinstance(body.dtype, tuple): return None   # a kernel SINK, CUSTOMFUNCTION...: void
    params = params_of(body)
    if all(p.slot >= len(args) or p.axis == args[p.slot].axis for p in params): return body.axis
    new = {id(p): args[p.slot] for p in params if p.slot < len(args)}
    for v in _open_postorder(body, bodies):
      if id(v) in new: continue
      skip = bodies.get(v.op, ())
      vs = [s if k in skip else new.get(id(s), s) for k, s in enumerate(v.src)]
      if all(a is b for a, b in zip(vs, v.src)): continue
      nv = copy.copy(v); nv.src = vs
      nv.dtype, nv.shape, nv.device, nv.addrspace, nv.min_max, nv.axis = ops[v.op].derive_all(vs, v.arg, v.op, level, nv)
      new[id(v)] = nv
    return new.get(id(body), body).axis

  return {"is_storage": is_storage, "under_through": under_through, "params_of": params_of, "call_axis": call_axis, "after_min_max": after_min_max}


def _needs_tables(*_):
  raise RuleSyntaxError("this rule function reads the op table: compile rules through tinyspec.tables.Tables")


def linear_order_ok(node) -> bool:
  pos = {id(s): j for j, s in enumerate(node.src)}
  for j, s in enumerate(node.src):
    for x in s.src:
      if pos.get(id(x), j) >= j: return False
  return True


def binary_len(data: str) -> int:
  try:
    return len(base64.b64decode(data, validate=True))
  except (binascii.Error, ValueError):
    raise RuleFail("arg.schema", "BINARY data is not valid base64") from None


def representable(v, name) -> bool:
  d = _dt(name)
  if d.cls == "bool": return isinstance(v, bool) or v in (0, 1)
  if d.cls == "float": return not (type(v) is int and abs(v) >= 1 << 1024)   # an integer past float64's range has no float
  if isinstance(v, bool) or not isinstance(v, int): return False
  return d.min is not None and d.max is not None and d.min <= v <= d.max


def itemsize(name) -> int: return _dt(name).itemsize


def bitcast_shape(shape, src_dtype, dtype):
  """BITCAST: the shape with the last axis rescaled by the itemsizes (decision bitcast-size);
  the check BITCAST.size holds it to whole elements."""
  a, b = _dt(src_dtype).itemsize, _dt(dtype).itemsize
  if a == b or not shape: return tuple(shape)
  return tuple(shape[:-1]) + (shape[-1] * a // b,)
def dtype_class(name) -> str: return _dt(name).cls if isinstance(name, str) else "tuple"


FUNCTIONS = {
  "require": require, "numel": numel, "shape_value": shape_value, "broadcast": broadcast, "collapse": collapse,
  "index_shape": index_shape, "index_axis": index_axis, "device_of": device_of, "is_multi": is_multi,
  "first_device": first_device, "inherit_axis": inherit_axis, "reshape_axis": reshape_axis, "is_tuple": is_tuple,
  "is_storage": _needs_tables, "under_through": _needs_tables, "params_of": _needs_tables, "call_axis": _needs_tables, "after_min_max": _needs_tables,
  "bitcast_shape": bitcast_shape, "linear_order_ok": linear_order_ok, "binary_len": binary_len,
  "representable": representable, "itemsize": itemsize, "dtype_class": dtype_class,
  "dtype_range": iv.dtype_range, "iv_const": iv.iv_const, "iv_consts": iv.iv_consts, "iv_zero": iv.iv_zero,
  "iv_hull": iv.iv_hull, "iv_add": iv.iv_add, "iv_sub": iv.iv_sub, "iv_mul": iv.iv_mul, "iv_max": iv.iv_max,
  "iv_idiv": iv.iv_idiv, "iv_shl": iv.iv_shl, "iv_shr": iv.iv_shr, "iv_mod": iv.iv_mod, "iv_cmplt": iv.iv_cmplt, "iv_cmpne": iv.iv_cmpne,
  "iv_where": iv.iv_where, "iv_cast": iv.iv_cast,
  # plain builtins a rule may use
  "len": len, "tuple": tuple, "list": list, "set": set, "sorted": sorted, "range": range, "all": all, "any": any,
  "min": min, "max": max, "sum": sum, "zip": zip, "abs": abs, "isinstance": isinstance, "str": str, "int": int,
}
CONSTANTS = {"None": None, "True": True, "False": False, "inf": math.inf}

_ALLOWED = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Call, ast.Attribute,
            ast.Subscript, ast.Slice, ast.Name, ast.Constant, ast.Tuple, ast.List, ast.Set, ast.GeneratorExp, ast.ListComp,
            ast.comprehension, ast.Starred, ast.Load, ast.Store, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd,
            ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
            ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.keyword)

# Names a rule may read besides FUNCTIONS: the node's inputs and earlier properties.
PARAMS = ("src", "arg", "op", "level", "node", "dtype", "shape", "device", "addrspace", "min_max")


def _check_and_rewrite(expr: str, where: str, known: tuple[str, ...] = PARAMS):
  """Parse one rule expression, check every AST node against the whitelist (names must be
  in `known`, FUNCTIONS, CONSTANTS or bound by a comprehension) and return its body with
  `arg.x` rewritten to `arg['x']`."""
  if not isinstance(expr, str): expr = repr(expr)
  try:
    tree = ast.parse(expr, mode="eval")
  except SyntaxError as e:
    raise RuleSyntaxError(f"{where}: cannot parse {expr!r}: {e.msg}") from None
  bound = set()
  for n in ast.walk(tree):
    if isinstance(n, ast.comprehension):
      for t in ast.walk(n.target):
        if isinstance(t, ast.Name): bound.add(t.id)
  for n in ast.walk(tree):
    if not isinstance(n, _ALLOWED):
      raise RuleSyntaxError(f"{where}: {type(n).__name__} is not allowed in rules: {expr!r}")
    if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
      raise RuleSyntaxError(f"{where}: private attribute {n.attr!r} in {expr!r}")
    if isinstance(n, ast.Name) and n.id not in known and n.id not in FUNCTIONS and n.id not in CONSTANTS and n.id not in bound:
      later = " (a property computed later)" if n.id in PARAMS else ""
      raise RuleSyntaxError(f"{where}: unknown name {n.id!r}{later} in {expr!r}")
    if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in FUNCTIONS) and \
       not (isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "index", "keys", "values", "items")):
      raise RuleSyntaxError(f"{where}: only the rule functions may be called: {expr!r}")
  # `arg.dtype` reads a key of the arg; make it a subscript (a Python-level __getattr__ is slow)
  class _ArgKeys(ast.NodeTransformer):
    def visit_Attribute(self, n):
      self.generic_visit(n)
      if isinstance(n.value, ast.Name) and n.value.id == "arg" and n.attr not in ("get", "keys", "values", "items", "index"):
        return ast.copy_location(ast.Subscript(value=n.value, slice=ast.Constant(n.attr), ctx=ast.Load()), n)
      return n
  return _ArgKeys().visit(tree).body


def _env(functions=None):
  return {"__builtins__": {}, **FUNCTIONS, **(functions or {}), **CONSTANTS}


def compile_rule(expr: str, where: str = "rule", functions: dict | None = None):
  """Compile one rule expression into a function of PARAMS (keyword-free, positional).
  `functions` overrides entries of FUNCTIONS (the table-bound ones, see table_functions)."""
  body = _check_and_rewrite(expr, where)
  lam = ast.Expression(ast.Lambda(args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in PARAMS], kwonlyargs=[], kw_defaults=[], defaults=[]), body=body))
  code = compile(ast.fix_missing_locations(lam), where, "eval")
  return eval(code, _env(functions))   # noqa: S307 -- the AST was whitelisted above


def compile_says(text: str, where: str = "says", functions: dict | None = None):
  """Compile a check's `says:` text, a message with rule expressions in braces
  ("source {src[0].shape} has {numel(src[0].shape)} elements"), into a function of PARAMS
  that returns the text with each expression's value in its place (long tuples cut short).
  It runs only for a node that failed the check, to state the quantities compared."""
  pieces = _split_says(text, where)
  fns = [(lit, compile_rule(expr, f"{where}{{{expr}}}", functions) if expr else None) for lit, expr in pieces]

  def render(*params) -> str:
    return "".join(lit + (_show(fn(*params)) if fn is not None else "") for lit, fn in fns)
  return render


def _split_says(text: str, where: str) -> list[tuple[str, str | None]]:
  """[(literal text, the expression after it or None)]; braces nest inside an expression."""
  out: list[tuple[str, str | None]] = []
  lit: list[str] = []
  expr: list[str] = []
  depth = 0
  for ch in text:
    if depth == 0 and ch == "{": depth = 1; continue
    if depth == 0:
      if ch == "}": raise RuleSyntaxError(f"{where}: unbalanced '}}' in {text!r}")
      lit.append(ch); continue
    depth += (ch == "{") - (ch == "}")
    if depth == 0:
      out.append(("".join(lit), "".join(expr))); lit, expr = [], []
    else: expr.append(ch)
  if depth: raise RuleSyntaxError(f"{where}: unbalanced '{{' in {text!r}")
  out.append(("".join(lit), None))
  return out


def _show(v) -> str:
  """A value for a message: a long tuple or list shows its first items only."""
  if isinstance(v, (tuple, list)) and len(v) > 8: return _short(tuple(v))
  return str(v)


INPUTS = PARAMS[:5]   # src, arg, op, level, node: what a node brings; the rest are properties


def compile_props(props: tuple[str, ...], exprs: list[str], where: str = "derive", functions: dict | None = None):
  """Compile the property rules of one op into a single function
  f(src, arg, op, level, node) -> tuple of the properties, computed in order: each rule
  may read the inputs and the properties before it (checked here), which is what the
  one-rule-per-call form passes. One call per node instead of one per property."""
  fn = ast.FunctionDef(name="derive", args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in INPUTS], kwonlyargs=[], kw_defaults=[], defaults=[]),
                       body=[], decorator_list=[], returns=None)
  if "type_params" in ast.FunctionDef._fields: fn.type_params = []   # type: ignore[attr-defined]  # Python >= 3.12
  for k, (prop, expr) in enumerate(zip(props, exprs)):
    body = _check_and_rewrite(expr, f"{where}.{prop}", INPUTS + tuple(props[:k]))
    fn.body.append(ast.Assign(targets=[ast.Name(prop, ast.Store())], value=body))
  fn.body.append(ast.Return(ast.Tuple([ast.Name(p, ast.Load()) for p in props], ast.Load())))
  mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
  env = _env(functions)
  exec(compile(mod, where, "exec"), env)   # noqa: S102 -- every expression was whitelisted above
  return env["derive"]
