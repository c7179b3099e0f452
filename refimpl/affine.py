"""Kernel reads whose index is an affine function of the loop indices, found statically (once
per plan), so that `x[c + a*i + b*j]` is read as a strided view of x instead of a gather.

tinygrad's kernels index flat buffers with integer arithmetic on RANGEs and SPECIALs
(`gidx0*128 + lidx0*4 + k`, SHL for the powers of two, MULACC for the row offsets, CASTs
from index to int32, a VCONST for an upcast vector). `affine_forms` writes such an index as
`const + sum(coef[axis] * it[axis]) (+ vec)`, where `vec` is an arithmetic progression along
the value's own dim. A form is only kept when no intermediate value can wrap: every node of
the expression, over the loops' static bounds (the validator's intervals), stays inside its
dtype (signed integers and index only), so the arithmetic is exact and the form is the value.

At run time (Scope.read_index) the view is used only when the read is in range at every
point (else the gather's out-of-range semantics apply), the storage is the same at every
point, and no axis of the form is held at one iteration by a stepped loop.
"""
from __future__ import annotations
from tinyspec.dtypes import DTYPES
from tinyspec.refimpl.registry import role

_SIGNED = frozenset(n for n, d in DTYPES.items() if d.cls in ("int", "index"))


class Affine:
  """const + sum(c * it[axis] for axis, c in coefs) (+ vec_start + vec_step * k for k < vec_len)."""
  __slots__ = ("coefs", "const", "vec")

  def __init__(self, coefs: dict, const: int, vec: tuple | None = None):
    self.coefs, self.const, self.vec = coefs, const, vec   # vec: (start, step, length) or None

  def scaled(self, k: int) -> "Affine":
    vec = None if self.vec is None else (self.vec[0] * k, self.vec[1] * k, self.vec[2])
    return Affine({d: c * k for d, c in self.coefs.items() if c * k}, self.const * k, vec)

  def plus(self, o: "Affine") -> "Affine | None":
    if self.vec is not None and o.vec is not None:
      if self.vec[2] != o.vec[2]: return None
      vec = (self.vec[0] + o.vec[0], self.vec[1] + o.vec[1], self.vec[2])
    else: vec = self.vec or o.vec
    coefs = dict(self.coefs)
    for d, c in o.coefs.items():
      coefs[d] = coefs.get(d, 0) + c
      if not coefs[d]: del coefs[d]
    return Affine(coefs, self.const + o.const, vec)

  def magnitude(self, extent: dict) -> int:
    """The largest |value| over loop iterations 0..extent[axis]."""
    m = abs(self.const) + sum(abs(c) * extent[d] for d, c in self.coefs.items())
    if self.vec is not None: m += abs(self.vec[0]) + abs(self.vec[1]) * max(self.vec[2] - 1, 0)
    return m

  @property
  def constant(self): return None if self.coefs or self.vec is not None else self.const


def _form(n, src_forms, view, axis_of, i):
  """The form of node n from its sources' forms, or None."""
  op = n.op
  if op in ("RANGE", "SPECIAL"): return Affine({axis_of[i]: 1}, 0) if i in axis_of else None
  if op == "CONST":
    v = n.arg.get("value") if isinstance(n.arg, dict) else None
    return Affine({}, v) if type(v) is int else None
  if op == "VCONST":
    vs = n.arg.get("values") if isinstance(n.arg, dict) else None
    if not vs or any(type(v) is not int for v in vs): return None
    step = vs[1] - vs[0] if len(vs) > 1 else 0
    return Affine({}, 0, (vs[0], step, len(vs))) if all(v == vs[0] + step * k for k, v in enumerate(vs)) else None
  if any(f is None for f in src_forms): return None
  if op == "CAST": return src_forms[0]
  if op == "ADD": return src_forms[0].plus(src_forms[1])
  if op == "SUB": return src_forms[0].plus(src_forms[1].scaled(-1))
  if op in ("MUL", "MULACC"):
    a, b = src_forms[:2]
    k = b.constant if b.constant is not None else a.constant
    if k is None: return None
    prod = (a if b.constant is not None else b).scaled(k)
    return prod if op == "MUL" else prod.plus(src_forms[2])
  if op == "SHL":
    k = src_forms[1].constant
    return src_forms[0].scaled(1 << k) if k is not None and 0 <= k < 62 else None
  return None


def _int_forms(plan, nodes, views) -> dict:
  """{node: Affine} for every integer node of the plan whose value is its form."""
  axis_of = plan.axis_of
  extent = {}
  for r, d in axis_of.items():
    mm = views[r].min_max
    if not mm or type(mm[1]) is not int: return {}
    extent[d] = max(mm[1], 0)
  forms: dict = {}
  for i in plan.order:
    n = nodes[i]
    dt = views[i].dtype
    if dt not in _SIGNED or not isinstance(views[i].shape, tuple) or len(views[i].shape) > 1: continue
    if n.op not in ("RANGE", "SPECIAL", "CONST", "VCONST") and any(j not in forms for j in n.src): continue
    f = _form(n, [forms.get(j) for j in n.src], views[i], axis_of, i)
    if f is None or f.magnitude(extent) > DTYPES[dt].max: continue   # could wrap: not its value
    forms[i] = f
  return forms


def analyse(plan, nodes, views) -> None:
  """Fill plan.forms (integer node -> Affine), plan.affine (read INDEX -> the form of its
  index), plan.affine_targets (STORE target INDEX straight on a storage root -> the form) and
  plan.lazy: index arithmetic that only affine reads and targets consume, never computed
  unless a read or write falls back to index arrays (Scope.index_value builds it from the form)."""
  forms = plan.forms = _int_forms(plan, nodes, views)
  one = lambda i: nodes[i].op == "INDEX" and len(nodes[i].src) == 2 and nodes[i].src[1] in forms
  plan.affine = {i: forms[nodes[i].src[1]] for i in plan.order if one(i) and i in plan.read}
  plan.affine_targets = {}
  for i in plan.order:
    if one(i) and i in plan.root and i not in plan.read and plan.root.get(nodes[i].src[0]) == nodes[i].src[0]:
      plan.affine_targets[i] = forms[nodes[i].src[1]]
  replayed = set()   # links whose index values a unit reads from the scope (AFTER chains, CALL arguments)
  for i in plan.order:
    r = role(nodes[i].op)
    if r == "after" and nodes[i].src: replayed.update(plan.chain_links(nodes[i].src[0]))
    elif r == "call": replayed.update(l for a in nodes[i].src[1:] for l in plan.chain_links(a))
    elif r == "store" and nodes[i].src[0] not in plan.affine_targets: replayed.update(plan.chain_links(nodes[i].src[0]))
  plan.lazy = set()
  if plan.tracing: return
  keep = set(plan.roots) | plan.in_loop

  def fine(c, k):
    rc = role(nodes[c].op)
    if rc == "sink" or c in plan.lazy: return True
    return k == 1 and c not in replayed and c not in plan.in_loop and (c in plan.affine or c in plan.affine_targets)
  for j in reversed(plan.order):
    if j in forms and j not in keep and role(nodes[j].op) != "loop" and nodes[j].op not in ("CONST", "VCONST") \
       and plan.uses.get(j) and all(fine(c, k) for c, k in plan.uses[j]):
      plan.lazy.add(j)
