"""The words in a picture: a node's box label (op, dtype, shape, abbreviated arg) and its
hover text (derived properties, the full arg, the diagnostics). Long values are cut as
they are written, so a 10 MB arg costs no more than a short one."""
from __future__ import annotations
import math
import re
from tinyspec.tables import PROPS

ARG_WIDTH = 28          # characters of the arg on a box
TIP_ARG_WIDTH = 400     # characters of the arg in the hover text
TIP_SOURCES = 40        # sources listed in the hover text
# characters XML 1.0 cannot hold (and lone surrogates, which a JSON "\ud800" escape makes)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def clean(s: str) -> str:
  """s with every character an SVG/HTML/dot file cannot carry replaced by U+FFFD."""
  return _NOT_XML.sub("\ufffd", s)


def fmt(v) -> str:
  """A derived property or declared value as people write it: (4, 8), float32, -inf."""
  if v is None: return "-"
  if isinstance(v, tuple): return "(" + ", ".join(fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
  if isinstance(v, float):
    if math.isnan(v): return "nan"
    if math.isinf(v): return "inf" if v > 0 else "-inf"
    return repr(v)
  return str(v)


def short(v, width: int) -> str:
  """v written compactly and cut at `width` characters (with …): an object as k=v pairs."""
  out: list[str] = []
  left = [width + 1]

  def put(s: str) -> bool:
    if left[0] <= 0: return False
    s = s[:left[0]]
    out.append(s); left[0] -= len(s)
    return left[0] > 0

  def walk(x, top=False):
    if left[0] <= 0: return
    if isinstance(x, dict):
      if not top: put("{")
      for k, (key, val) in enumerate(x.items()):
        if k and not put(" " if top else ", "): return
        if not put(f"{key}=" if top else f"{key}: "): return
        walk(val)
      if not top: put("}")
    elif isinstance(x, (tuple, list)):
      put("[")
      for k, e in enumerate(x):
        if k and not put(", "): return
        walk(e)
      put("]")
    elif isinstance(x, str): put(x)
    elif isinstance(x, bool) or x is None: put("true" if x is True else "false" if x is False else "null")
    else: put(fmt(x))

  walk(v, top=True)
  text = clean("".join(out).replace("\n", " "))
  return text if len(text) <= width else text[:width - 1] + "…"


def arg_label(arg, dtype) -> str:
  """The arg as a box shows it: without a `dtype` the box already shows, and a single
  remaining field by its value alone (a CONST reads 1.5, not value=1.5)."""
  if arg is None: return ""
  if isinstance(arg, dict):
    arg = {k: v for k, v in arg.items() if not (k == "dtype" and v == dtype)}
    if len(arg) == 1: arg = next(iter(arg.values()))
    elif not arg: return ""
  return short(arg, ARG_WIDTH)


def dtype_shape(node, view) -> str:
  """'float32 (4, 8)' from the derived properties, else from what the node declares."""
  dt = view.dtype if view is not None else node.dtype
  sh = view.shape if view is not None else node.shape
  parts = [fmt(dt) if dt is not None else "", fmt(sh) if sh is not None else ""]
  return clean(" ".join(p for p in parts if p))


def node_lines(i: int, node, view, position: int | None, diags=()) -> list[str]:
  """A node's box: 'N OP' (with '#k' for an instruction in a listing), dtype and shape, arg,
  and the rule ids it breaks."""
  head = f"{i} {clean(node.op)}" + (f"  #{position}" if position is not None else "")
  lines = [head]
  ds = dtype_shape(node, view)
  if ds: lines.append(ds)
  a = arg_label(node.arg, view.dtype if view is not None else node.dtype)
  if a: lines.append(a)
  if diags:
    rules = list(dict.fromkeys(clean(d.rule) for d in diags))
    lines.append(short("! " + " ".join(rules), ARG_WIDTH))
  return lines


def node_tip(i: int, node, view, diags, slot_names, listed, note) -> str:
  """A node's hover text: op, sources by slot, the arg, the six derived properties (or
  why there are none), what it declares, where it is listed, and every diagnostic."""
  lines = [f"node {i}: {clean(node.op)}"]
  if node.src:
    shown = [f"{k}:{name}={j}" if name else f"{k}={j}" for k, (j, name) in enumerate(zip(node.src[:TIP_SOURCES], slot_names))]
    more = f", … {len(node.src) - TIP_SOURCES:,} more" if len(node.src) > TIP_SOURCES else ""
    lines.append("src: " + ", ".join(shown) + more)
  if node.arg is not None: lines.append("arg: " + short(node.arg, TIP_ARG_WIDTH))
  if view is not None:
    for p in PROPS: lines.append(f"{p}: {clean(fmt(getattr(view, p)))}")
  else:
    lines.append("derived properties: none (the node or a source is invalid)")
  if node.dtype is not None or node.shape is not None:
    lines.append("declared: " + " ".join(f"{k}={clean(fmt(v))}" for k, v in (("dtype", node.dtype), ("shape", node.shape)) if v is not None))
  if node.name is not None: lines.append(f"name: {clean(node.name)}")
  if node.tag is not None: lines.append("tag: " + short(node.tag, 80))
  for owner, k in sorted((listed or {}).items()): lines.append(f"listed at #{k} of LINEAR node {owner}")
  if note: lines.append(clean(note))
  for d in diags: lines.append(f"error [{clean(d.rule)}]: {clean(d.message)}")
  return "\n".join(lines)


def chain_lines(run, nodes, views) -> list[str]:
  """A collapsed chain's box: its extent, its ops (a repeating pattern as (A·B) ×k), and
  the last node's dtype and shape."""
  last = run[-1]
  ops = [clean(nodes[j].op) for j in run]
  lines = [f"{run[0]}…{last}: {len(run):,} ops", op_pattern(ops, 40)]
  ds = dtype_shape(nodes[last], views[last] if views else None)
  if ds: lines.append(ds)
  return lines


def op_pattern(ops: list[str], width: int) -> str:
  """The op sequence of a chain, a repeating period written once: (ADD·MUL) ×500 (+1 when
  the run ends inside a period)."""
  n = len(ops)
  for p in range(1, min(n // 2, 16) + 1):
    if all(ops[k] == ops[k % p] for k in range(p, n)):
      text = "(" + "·".join(ops[:p]) + f") ×{n // p:,}" + (f" +{n % p}" if n % p else "")
      return text if len(text) <= width else text[:width - 1] + "…"
  text = "·".join(ops[:12]) + ("·…" if n > 12 else "")
  return text if len(text) <= width else text[:width - 1] + "…"


def chain_tip(run, nodes, views, limit: int = 60) -> str:
  lines = [f"nodes {run[0]}…{run[-1]}: a chain of {len(run)} single-use ops, collapsed (--collapse off shows each)"]
  for j in run[:limit]:
    n = nodes[j]
    src = ",".join(map(str, n.src))
    a = arg_label(n.arg, views[j].dtype if views and views[j] is not None else n.dtype)
    lines.append(f"{j} {clean(n.op)} ({src}) {dtype_shape(n, views[j] if views else None)}" + (f" {a}" if a else ""))
  if len(run) > limit: lines.append(f"… {len(run) - limit} more")
  return "\n".join(lines)
