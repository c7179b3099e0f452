"""The graph file format: a list of nodes in topological order, each referring to earlier
nodes by index. JSON (or plain YAML, read safely) described by spec/graph.schema.json.

Loading never raises on bad input: it returns the graph (or None) plus diagnostics with
rule ids file.read, file.parse and file.schema. The structural checks here mirror the
JSON Schema exactly (a test holds them to it); they are written out by hand because
running jsonschema over a million-node file would take far longer than validating it.
"""
from __future__ import annotations
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
import yaml
from tinyspec.frozen import freeze, thaw, FrozenDict
from tinyspec.diagnostics import Diagnostic, Capped, did_you_mean
from tinyspec.uop import UOp, toposort
from tinyspec.files import read_regular, FileRefused
from tinyspec.limits import limits
from tinyspec.limits import default_budget
import gc

_OP_RE = re.compile(r"[A-Z][A-Z0-9_]*\Z")   # ECMA-262 `^...$` of the schema: nothing after the name, not even a newline
_DOC_KEYS = {"format", "version", "level", "roots", "meta", "nodes"}
_NODE_KEYS = {"op", "src", "arg", "dtype", "shape", "tag", "name"}


class Node:
  """One row of a graph file. `src` are indices of earlier nodes; `arg` is frozen JSON."""
  __slots__ = ("op", "src", "arg", "dtype", "shape", "tag", "name")

  def __init__(self, op: str, src=(), arg=None, dtype=None, shape=None, tag=None, name=None):
    self.op, self.src, self.arg = op, tuple(src), freeze(arg)
    self.dtype = tuple(dtype) if isinstance(dtype, list) else dtype
    self.shape = _freeze_shape(shape)
    self.tag, self.name = freeze(tag), name

  @classmethod
  def _checked(cls, op: str, src: tuple, arg) -> "Node":
    """A node from parts the loader has already checked and frozen (the fast path)."""
    self = object.__new__(cls)
    self.op, self.src, self.arg = op, src, arg
    self.dtype = self.shape = self.tag = self.name = None
    return self

  def to_json(self) -> dict:
    d: dict = {"op": self.op}
    if self.src: d["src"] = list(self.src)
    if self.arg is not None: d["arg"] = thaw(self.arg)
    if self.dtype is not None: d["dtype"] = list(self.dtype) if isinstance(self.dtype, tuple) else self.dtype
    if self.shape is not None: d["shape"] = thaw(self.shape)
    if self.tag is not None: d["tag"] = thaw(self.tag)
    if self.name is not None: d["name"] = self.name
    return d

  def __repr__(self): return f"Node({self.op}, src={list(self.src)}, arg={thaw(self.arg)!r})"


def _freeze_shape(s):
  if s is None: return None
  return tuple(_freeze_shape(x) if isinstance(x, list) else x for x in s)


@dataclass
class Graph:
  nodes: list[Node]
  roots: list[int] | None = None
  level: str | None = None
  meta: dict = field(default_factory=dict)

  @property
  def root_indices(self) -> list[int]:
    return list(self.roots) if self.roots is not None else [len(self.nodes) - 1]

  def reached(self) -> "Graph":
    """The graph less the nodes no root reaches, the rest in their order (itself when none is left out)."""
    seen, todo = set(), self.root_indices
    while todo:
      if (i := todo.pop()) not in seen: seen.add(i); todo.extend(self.nodes[i].src)
    if len(seen) == len(self.nodes): return self
    new = {old: k for k, old in enumerate(sorted(seen))}
    nodes = [Node(n.op, [new[j] for j in n.src], n.arg, n.dtype, n.shape, n.tag, n.name) for n in (self.nodes[i] for i in sorted(seen))]
    return Graph(nodes, None if self.roots is None else [new[r] for r in self.roots], self.level, dict(self.meta))

  # ---- conversion to and from UOps
  def uops(self) -> list:
    """One UOp per node (hash-consed: identical nodes become the same UOp)."""
    out: list = []
    for i, n in enumerate(self.nodes):
      if n.src and (min(n.src) < 0 or max(n.src) >= i):
        raise ValueError(f"node {i} ({n.op}): src {[j for j in n.src if not 0 <= j < i][0]} is not an earlier node [graph.src]")
      out.append(UOp(n.op, tuple(out[j] for j in n.src), n.arg, dtype=n.dtype, shape=n.shape, tag=n.tag, name=n.name))
    return out

  def root_uops(self) -> list:
    u = self.uops()
    bad = [r for r in self.root_indices if not 0 <= r < len(u)]
    if bad: raise ValueError(f"root {bad[0]} is not a node index [graph.src]")
    return [u[i] for i in self.root_indices]

  @staticmethod
  def from_uops(*roots, level: str | None = None, meta: dict | None = None) -> "Graph":
    """The UOps reachable from roots as a node list, sources first (uop.toposort)."""
    index: dict[int, int] = {}
    nodes: list[Node] = []
    for u in toposort(*roots):
      index[id(u)] = len(nodes)
      nodes.append(Node(u.op, [index[id(s)] for s in u.src], u.arg, u.dtype, u.shape, u.tag, u.name))
    roots_idx = [index[id(r)] for r in roots]
    return Graph(nodes, None if roots_idx == [len(nodes) - 1] else roots_idx, level, dict(meta or {}))

  # ---- file format
  def to_json(self) -> dict:
    d: dict = {"format": "tinyspec-graph", "version": 1}
    if self.level: d["level"] = self.level
    if self.roots is not None: d["roots"] = list(self.roots)
    if self.meta: d["meta"] = self.meta
    d["nodes"] = [n.to_json() for n in self.nodes]
    return d

  def dumps(self) -> str:
    """Compact JSON, one node per line, so diffs of graph files stay readable."""
    head = {k: v for k, v in self.to_json().items() if k != "nodes"}
    lines = []
    for i, n in enumerate(self.nodes):
      try: lines.append(_dump(n.to_json()))
      except TypeError as e:   # a Python object in an arg or tag (a front-end buffer's identity...)
        raise TypeError(f"node {i} ({n.op}) is not JSON: {e}; a graph of front-end Tensors is saved through Tensor.graph() "
                        "or tinyspec.frontend.export()") from None
    body = _dump(head)[:-1] + (", " if head else "") + '"nodes": [\n  ' + ",\n  ".join(lines) + "\n]}\n"
    return body

  def save(self, path) -> None:
    Path(path).write_text(self.dumps())

  @staticmethod
  def load(path) -> "Graph":
    g, diags = load_file(path)
    if g is None or any(d.fatal for d in diags):
      raise GraphFileError(diags)
    return g

  @staticmethod
  def loads(text: str, name: str = "<string>") -> "Graph":
    g, diags = load_text(text, name)
    if g is None or any(d.fatal for d in diags):
      raise GraphFileError(diags)
    return g


def _dump(v) -> str:
  """JSON text of v; float NaN and infinities (from graphs built in Python) are written as
  the format's strings "nan", "inf", "-inf"."""
  try:
    return json.dumps(v, separators=(", ", ": "), allow_nan=False)
  except ValueError:
    return json.dumps(_specials_as_strings(v), separators=(", ", ": "), allow_nan=False)


def _specials_as_strings(v):
  if isinstance(v, float) and (v != v or v in _FLOAT_SPECIAL): return "nan" if v != v else _FLOAT_SPECIAL[v]
  if isinstance(v, dict): return {k: _specials_as_strings(x) for k, x in v.items()}
  if isinstance(v, (list, tuple)): return [_specials_as_strings(x) for x in v]
  return v


class GraphFileError(Exception):
  def __init__(self, diags):
    super().__init__("\n".join(d.format() for d in diags))
    self.diags = diags


# ------------------------------------------------------------------ reading
def load_file(path) -> tuple[Graph | None, list[Diagnostic]]:
  """Read a graph file: a regular file of at most limits.max_file_bytes, whose loading
  fits the memory budget (limits.load_factor bytes per byte of file)."""
  name = str(path)
  L = limits()
  try:
    data = read_regular(path, L.max_file_bytes, "the graph file")
  except FileRefused as e:
    return None, [Diagnostic(name, None, None, e.rule, e.message, exit_code=2)]
  refused = _over_budget(len(data), name)
  if refused: return None, [refused]
  return load_bytes(data, name)


def _over_budget(nbytes: int, name: str) -> Diagnostic | None:
  need = nbytes * limits().load_factor
  try: budget = default_budget()
  except ValueError as e: return Diagnostic(name, None, None, "file.limit", f"TINYSPEC_EVAL_BUDGET: {e}", exit_code=2)
  if need <= budget: return None
  return Diagnostic(name, None, None, "file.limit", f"loading this {nbytes:,}-byte file takes about {need:,} bytes, over the memory "
                    f"budget of {budget:,} bytes (TINYSPEC_EVAL_BUDGET)", exit_code=2)


def load_text(text: str, name: str = "<string>"):
  return load_bytes(text.encode("utf-8", "surrogatepass"), name)


def _reject_constant(c):
  raise ValueError(f"{c} is not JSON (write \"nan\", \"inf\" or \"-inf\" as a string)")


class LimitError(ValueError):
  """A document over a limit of `limits:` (rule file.limit)."""


def _int_too_long(digits: int) -> LimitError:
  return LimitError(f"an integer of {digits:,} digits, more than limits.max_int_digits = {limits().max_int_digits}")


def _max_int_digits() -> int:
  return limits().max_int_digits


def _bounded_int(s: str) -> int:
  if len(s) > _MAX_INT_DIGITS[0] and len(s.lstrip("-")) > _MAX_INT_DIGITS[0]: raise _int_too_long(len(s.lstrip("-")))
  return int(s)


_MAX_INT_DIGITS = [400]    # set from the tables when a document is parsed


def _finite_float(s: str) -> float:
  f = float(s)
  if f in (math.inf, -math.inf):
    raise ValueError(f"the number {s[:40]} does not fit a float64 (write \"inf\" or \"-inf\" as a string)")
  return f


class _JSONYamlLoader(yaml.SafeLoader):
  """Safe YAML that yields JSON data only: no aliases (they make exponentially large
  documents), no !!binary/!!set/!!omap/!!pairs/!!timestamp, and dates stay strings."""
  def compose_node(self, parent, index):
    if self.check_event(yaml.events.AliasEvent):
      ev = self.peek_event()
      raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not accepted: a graph file is plain JSON data", ev.start_mark)
    return super().compose_node(parent, index)


def _refuse_tag(loader, node):
  raise yaml.constructor.ConstructorError(None, None, f"the YAML tag {node.tag} has no JSON equivalent", node.start_mark)


_JSONYamlLoader.yaml_implicit_resolvers = {
  ch: [(tag, rx) for tag, rx in rs if tag != "tag:yaml.org,2002:timestamp"] for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _t in ("binary", "set", "omap", "pairs", "timestamp"):
  _JSONYamlLoader.add_constructor(f"tag:yaml.org,2002:{_t}", _refuse_tag)


def _construct_int(loader, node):
  """YAML integers, their text held to limits.max_int_digits before it is converted."""
  if len(node.value) > _MAX_INT_DIGITS[0] + 3: raise _int_too_long(len(node.value))
  return yaml.SafeLoader.construct_yaml_int(loader, node)


_JSONYamlLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

_FLOAT_SPECIAL = {math.inf: "inf", -math.inf: "-inf"}


def _jsonify_yaml(doc):
  """Check that a YAML document is JSON data (string keys) and write its float specials
  as the strings the format uses ("nan", "inf", "-inf"). Integers are held to
  limits.max_int_digits here (YAML's hex, octal and sexagesimal forms make any size
  without a decimal digit string). Iterative: no depth limit."""
  bound = 10 ** _MAX_INT_DIGITS[0]
  def fix(v):
    if type(v) is float and (v != v or v in _FLOAT_SPECIAL): return "nan" if v != v else _FLOAT_SPECIAL[v]
    if type(v) is int and not -bound < v < bound: raise _int_too_long(len(str(abs(v))) if v.bit_length() < 13000 else v.bit_length() * 3 // 10)
    return v
  stack = [doc]
  while stack:
    v = stack.pop()
    if isinstance(v, dict):
      for k, x in v.items():
        if not isinstance(k, str): raise ParseError(f"the key {_short_repr(k)} is not a string (a graph file is JSON data)")
        if isinstance(x, (dict, list)): stack.append(x)
        elif type(x) is float or type(x) is int: v[k] = fix(x)
    elif isinstance(v, list):
      for i, x in enumerate(v):
        if isinstance(x, (dict, list)): stack.append(x)
        elif type(x) is float or type(x) is int: v[i] = fix(x)
  return fix(doc)


def _short_repr(v) -> str:
  if type(v) is int and v.bit_length() > 1000: return f"<an integer of {v.bit_length():,} bits>"
  return repr(v)[:100]


def parse_bytes(data: bytes, name: str):
  """bytes -> Python object; raises ParseError with a precise message."""
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ParseError(f"not UTF-8 text (byte {e.start})") from None
  stripped = text.lstrip()
  if not stripped:
    raise ParseError("the file is empty") from None
  as_json = name.endswith(".json") or (not name.endswith((".yaml", ".yml")) and stripped[0] in "{[")
  try:
    if as_json:
      return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
    return _jsonify_yaml(yaml.load(text, Loader=_JSONYamlLoader))   # noqa: S506 (a SafeLoader subclass)
  except LimitError:
    raise
  except json.JSONDecodeError as e:
    raise ParseError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
  except RecursionError:
    raise ParseError("nesting too deep") from None
  except yaml.constructor.ConstructorError as e:
    raise ParseError(f"YAML tags are not accepted (safe loading only){_at(e)}: {e.problem}"[:300]) from None
  except yaml.composer.ComposerError as e:
    raise ParseError(f"{e.problem}{_at(e)}") from None
  except yaml.MarkedYAMLError as e:
    raise ParseError(f"invalid YAML{_at(e)}: {e.problem}"[:300]) from None
  except yaml.YAMLError as e:
    raise ParseError(f"invalid YAML: {str(e).splitlines()[0]}"[:300]) from None
  except ValueError as e:
    raise ParseError(str(e)) from None
  except MemoryError:
    raise ParseError("the document is too large to parse") from None


class ParseError(Exception):
  pass


def _at(e) -> str:
  m = getattr(e, "problem_mark", None)
  return f" at line {m.line + 1} column {m.column + 1}" if m is not None else ""


def load_bytes(data: bytes, name: str) -> tuple[Graph | None, list[Diagnostic]]:
  _MAX_INT_DIGITS[0] = _max_int_digits()
  was = gc.isenabled(); gc.disable()   # see validate(): large acyclic allocations
  try:
    try:
      doc = parse_bytes(data, name)
    except LimitError as e:
      return None, [Diagnostic(name, None, None, "file.limit", str(e), exit_code=2)]
    except ParseError as e:
      return None, [Diagnostic(name, None, None, "file.parse", str(e), exit_code=2)]
    return from_document(doc, name)
  finally:
    if was: gc.enable()


def _as_index(x):
  """x as a non-negative integer if JSON Schema calls it one (1.0 is an integer there), else None."""
  if type(x) is int: return x if x >= 0 else None
  if type(x) is float and x.is_integer() and x >= 0: return int(x)
  return None


def _index_list(v):
  """A list of JSON Schema non-negative integers as a tuple of ints, else None."""
  if not isinstance(v, list): return None
  out = tuple(_as_index(x) for x in v)
  return None if None in out else out


def _valid_shape(s) -> bool:
  return isinstance(s, list) and all(_as_index(d) is not None or isinstance(d, list) for d in s)


def _shape_ints(s):
  return [d if isinstance(d, list) else _as_index(d) for d in s]


_NO_SRC: list = []      # marks a node without "src" (an empty list: the fast path takes it)
_ABSENT = object()      # marks a node without "arg"
_ATOMS = frozenset({type(None), str, int, bool, float})


def from_document(doc, name: str = "<graph>") -> tuple[Graph | None, list[Diagnostic]]:
  """Check a parsed document against the graph schema and the limits of `limits:`, and
  build the Graph. Mirrors spec/graph.schema.json exactly (tests/core/test_graphfile_schema.py
  holds them to it). Schema errors are reported up to limits.max_diagnostics (then
  counted); a limit broken (nodes, nesting, string length) refuses the whole file."""
  L = limits()
  _STRING_NESTING[:] = [L.max_string, L.max_nesting]
  diags = Capped(L.max_diagnostics)
  add = diags.add
  def bad(msg, node=None, op=None):
    add(Diagnostic(name, node, op, "file.schema", msg))
  try:
    return _build(doc, name, bad, diags, L)
  except LimitError as e:
    return None, [Diagnostic(name, getattr(e, "node", None), None, "file.limit", str(e), exit_code=2)]


def _build(doc, name, bad, diags, L):
  meta, roots, level = {}, None, None
  if isinstance(doc, list):
    raw_nodes = doc
  elif isinstance(doc, dict):
    extra = set(doc) - _DOC_KEYS
    if extra: bad(f"unknown top-level field(s): {_unknown_keys(extra, _DOC_KEYS)}"[:300])
    if "nodes" not in doc: bad("missing field 'nodes'"); return None, diags.close(name)
    raw_nodes = doc["nodes"]
    if "format" in doc and doc["format"] != "tinyspec-graph": bad(f"'format' must be \"tinyspec-graph\", not {_short_repr(doc['format'])}")
    if "version" in doc and not (type(doc["version"]) in (int, float) and doc["version"] == 1): bad(f"unsupported version {_short_repr(doc['version'])} (this reader knows 1)")
    if "level" in doc:
      level = doc["level"]
      if not (isinstance(level, str) and level in ("tensor", "kernel", "program")): bad(f"'level' must be tensor, kernel or program, not {_short_repr(level)}"); level = None
    if "meta" in doc:
      if isinstance(doc["meta"], dict): meta = thaw(_frozen(doc["meta"]))
      else: bad("'meta' must be an object")
    if "roots" in doc:
      roots = _index_list(doc["roots"])
      if roots is None: bad("'roots' must be a list of node indices")
      elif not roots: bad("'roots' is empty: a graph has at least one root"); roots = None
      else: roots = list(roots)
  else:
    bad(f"the document must be an object with 'nodes' or a list of nodes, not {_json_type(doc)}")
    return None, diags.close(name)
  if not isinstance(raw_nodes, list): bad(f"'nodes' must be a list, not {_json_type(raw_nodes)}"); return None, diags.close(name)
  if not raw_nodes: bad("'nodes' is empty: a graph has at least one node"); return None, diags.close(name)
  if len(raw_nodes) > L.max_nodes: raise LimitError(f"{len(raw_nodes):,} nodes, more than limits.max_nodes = {L.max_nodes:,}")

  nodes: list[Node] = []
  append, checked = nodes.append, Node._checked
  good_ops: set[str] = set()       # op names that passed the pattern check
  max_string = L.max_string
  i = 0
  try:
    for i, n in enumerate(raw_nodes):
      # fast path: {op, src?, arg?} with an op name seen before and plain int sources
      if type(n) is dict:
        op, src, arg = n.get("op"), n.get("src", _NO_SRC), n.get("arg", _ABSENT)
        if type(op) is str and op in good_ops and type(src) is list and len(n) == 1 + (src is not _NO_SRC) + (arg is not _ABSENT):
          for j in src:
            if type(j) is not int or j < 0: break
          else:
            if arg is _ABSENT: arg = None
            elif type(arg) is str:
              if len(arg) > max_string: _frozen(arg)   # raises
            elif type(arg) not in _ATOMS: arg = _frozen(arg)
            append(checked(op, tuple(src), arg))
            continue
      node = _node_slow(n, i, bad)
      if node.op != "?": good_ops.add(node.op)
      append(node)
  except LimitError as e:
    e.node = i
    raise
  g = Graph(nodes, roots, level, meta)
  return g, diags.close(name)


_STRING_NESTING = [1 << 24, 64]   # limits.max_string, limits.max_nesting (set by from_document)


def _frozen(v, depth: int = 1):
  """freeze(v) for a value read from a file, its strings held to limits.max_string and
  its nesting to limits.max_nesting (LimitError otherwise)."""
  t = type(v)
  if t is str:
    if len(v) > _STRING_NESTING[0]: raise LimitError(f"a string of {len(v):,} characters, more than limits.max_string = {_STRING_NESTING[0]:,}")
    return v
  if t is not dict and t is not list: return v
  if depth > _STRING_NESTING[1]: raise LimitError(f"arrays and objects nested deeper than limits.max_nesting = {_STRING_NESTING[1]}")
  if t is dict:
    limit = _STRING_NESTING[0]
    for k, x in v.items():   # flat objects of short strings (most args): one copy
      tx = type(x)
      if len(k) > limit or (tx is str and len(x) > limit) or tx not in _ATOMS: break
    else: return FrozenDict(v)
    return FrozenDict({_frozen(k, depth): _frozen(x, depth + 1) for k, x in v.items()})
  return tuple([x if type(x) in _NUMBERS else _frozen(x, depth + 1) for x in v])


_NUMBERS = frozenset({type(None), int, bool, float})
_BROKEN: "Node"   # the one Node("?") every non-object node becomes (set below, after Node)


def _unknown_keys(extra, known) -> str:
  """The unknown keys, each with the known key it is closest to ("srcs (did you mean 'src'?)")."""
  return ", ".join(str(k) + did_you_mean(k, sorted(known)) for k in sorted(map(str, extra))[:20])


def _json_type(v) -> str:
  return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null", int: "a number", float: "a number"}.get(type(v), type(v).__name__)


def _node_slow(n, i: int, bad) -> Node:
  """Check one node field by field; report every problem; a broken node becomes op '?'."""
  if not isinstance(n, dict):
    bad(f"a node must be an object, not {_json_type(n)}", i); return _BROKEN
  op = n.get("op")
  ok = True
  extra = set(n) - _NODE_KEYS
  if extra: bad(f"unknown field(s) {_unknown_keys(extra, _NODE_KEYS)}"[:300], i, op if isinstance(op, str) and len(op) <= 64 else None); ok = False
  if not isinstance(op, str) or len(op) > 64 or not _OP_RE.match(op):
    bad("missing 'op'" if "op" not in n else f"'op' must be an upper-case op name, not {_short_repr(op)}", i); ok = False; op = "?"
  shown = None if op == "?" else op
  src = _index_list(n.get("src", []))
  if src is None:
    bad("'src' must be a list of node indices", i, shown); ok = False; src = ()
  dt = n.get("dtype")   # dtype, shape and name are optional, but null is not a value for them
  if "dtype" in n and not (isinstance(dt, str) or (isinstance(dt, list) and all(isinstance(x, str) for x in dt))):
    bad("'dtype' must be a dtype name or a list of them", i, shown); ok = False; dt = None
  sh = n.get("shape")
  if "shape" in n:
    _frozen(sh)   # its nesting held to the limit
    if _valid_shape(sh): sh = _shape_ints(sh)
    else: bad("'shape' must be a list of non-negative dims", i, shown); ok = False; sh = None
  nm = n.get("name")
  if "name" in n and not (isinstance(nm, str) and len(nm) <= 128):
    bad("'name' must be a string of at most 128 characters", i, shown); ok = False; nm = None
  arg, tag = _frozen(n.get("arg")), _frozen(n.get("tag"))
  if not ok: return Node("?", src) if src else _BROKEN
  node = Node(op, src, None, dt, sh, None, nm)
  node.arg, node.tag = arg, tag
  return node


_BROKEN = Node("?")
