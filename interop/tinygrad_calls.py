"""tinygrad's calls where they are not the spec's (the map table's forms `call` and `index`
through `index_views`), written with the spec's ops.

  * `Tensor.callify` (tinygrad 0.14) makes the realize one CALL whose body is a SINK of
    tensor-level assigns into its PARAMs (AFTER(P, STORE(P, COPY(P')))...), not a kernel:
    the spec's CALL of a SINK is a kernel. Its meaning is the body with each PARAM k
    replaced by argument k: the stores into the argument buffers, a GROUP of them (the
    values that read a stored buffer are ordered by their AFTERs already).
  * A precompiled function's kernel (`@function(precompile=True)`) indexes a view of a
    PARAM (a RESHAPE to the argument's shape, a SHRINK to a symbolic size's window) with one
    index per axis of the view, which tinygrad's lowering moves onto the PARAM
    (rangeify.py pm_mops, indexing.py apply_movement_op); the spec's kernels have no
    movement ops (tensor-level ops): INDEX(PARAM, the index the views map it to).
  * A custom kernel (Tensor.custom_kernel) is a CALL of a kernel SINK (or a compiled PROGRAM)
    in the tensor graph: the kernel on its arguments' buffers (rangeify removes the RESHAPEs
    on a kernel's arguments), a PROGRAM's SOURCE in the language of their device.
  * A FUNCTION over a symbolic size: its body's variable PARAMs are its arguments, at the
    values they are bound to (interop/tinygrad_symbolic.py).

Each form is a generator of the importer's walk (interop/tinygrad_import.py): it yields
(source, context) and receives the node index back; cv is the importer's converter.
"""
from __future__ import annotations
from tinyspec.dispatch import Registry
from tinyspec.interop.tinygrad_contexts import V, INDEX
from tinyspec.interop.tinygrad_map import mapping, source_language
from tinyspec.interop.tinygrad_symbolic import with_bound_params

INDEX_VIEW = Registry("kernel index view", ops=False)   # view op -> the source's indices from the view's


def call(cv, u, ctx):
  """CALL: of a SINK of tensor-level assigns (Tensor.callify), the stores it makes into its
  arguments; of a kernel (a custom kernel's SINK or PROGRAM), the kernel on its arguments'
  buffers: an argument that is a RESHAPE is its source, as rangeify removes the RESHAPEs on
  a kernel's arguments; any other CALL (a TUPLE), the plain form."""
  body = u.src[0]
  if cv.level == "tensor" and (body.op.name == "PROGRAM" or (body.op.name == "SINK" and not _tensor_level(body))):
    args = tuple(a.src[0] if a.op.name == "RESHAPE" else a for a in u.src[1:])
    if args != u.src[1:]: cv.report.forms["CALL of a kernel: a RESHAPEd argument as its buffer"] += 1
    outer = cv.language   # a PROGRAM's SOURCE is in the language of the device it runs on: its arguments'
    if body.op.name == "PROGRAM" and cv.language is None: cv.language = source_language(_device(args))
    made = yield from cv.plain_form(u.replace(src=(body, *args)), ctx)
    cv.language = outer
    return made
  if cv.level != "tensor" or body.op.name != "SINK":
    return (yield from cv.plain_form(u, ctx))
  cv.report.forms["CALL of a tensor-level SINK (callify) inlined"] += 1
  stores = []
  for s in inlined(u).src:
    for dep in (s.src[1:] if s.op.name == "AFTER" else (s,)): stores.append((yield dep, V()))
  return cv.add("GROUP", stores)


def _device(args) -> str | None:
  for a in args:
    try: d = a.device
    except Exception: continue   # noqa: BLE001 (no device)
    if isinstance(d, str): return d
  return None


def function(cv, u, ctx):
  """FUNCTION at tensor level: its body's symbolic-size PARAMs bound to its arguments'
  bound values (interop/tinygrad_symbolic.py), then the plain form."""
  bound = with_bound_params(u)
  if bound is not u: cv.report.forms["FUNCTION's symbolic-size PARAM as its argument's bound value"] += 1
  return (yield from cv.plain_form(bound, ctx))


def inlined(u):
  """The body of CALL or FUNCTION u with each PARAM k replaced by argument k (a nested
  CALL's or FUNCTION's body keeps its own PARAMs)."""
  body, args = u.src[0], u.src[1:]
  new = {}
  for v in body.toposort():
    if v.op.name == "PARAM" and getattr(v.arg, "slot", -1) in range(len(args)): new[v] = args[v.arg.slot]
    elif v.op.name in ("CALL", "FUNCTION"): new[v] = v.replace(src=(v.src[0], *(new[s] for s in v.src[1:])))   # its body: its own PARAMs
    else: new[v] = v.replace(src=tuple(new[s] for s in v.src)) if v.src else v
  return new[body]


def _tensor_level(sink) -> bool:
  """A SINK with no RANGE and no INDEX: tensor-level assigns, not a kernel."""
  return not any(v.op.name in ("RANGE", "INDEX") for v in sink.toposort())


def view_chain(cv, u) -> tuple | None:
  """For a kernel's INDEX(V_1(...V_k(B)), i...) with each V one of the map table's
  `index_views` and one index per axis of V_1: (B, [V_1 ... V_k]); None for any other INDEX.
  (An INDEX is a kernel's at every level: a tensor graph holds one only in the body of a
  custom kernel it CALLs.)"""
  views, v, names = [], u.src[0], mapping()["index_views"]
  while v.op.name in names:
    views.append(v)
    v = v.src[0]
  return (v, views) if views and _rank(views[0]) == len(u.src) - 1 else None


def through_views(cv, views: list, idx: list):
  """The indices into the buffer under views (outermost first) of the per-axis indices idx
  (node indices) into the outermost view: tinygrad's apply_movement_op, view by view."""
  for v in views:
    idx = yield from INDEX_VIEW[v.op.name](cv, v, idx)
  cv.report.forms["INDEX of a view (" + " of ".join(v.op.name for v in views) + ") as an INDEX of its buffer"] += 1
  return idx


def _rank(v) -> int | None:
  try: return len(v.shape)
  except Exception: return None   # noqa: BLE001 (shapeless)


def _dim(cv, d):
  """A dim (an int, or a tinygrad UOp over variables: a kernel's symbolic size) as an index value."""
  return cv.const(d, "index") if isinstance(d, int) else (yield d, INDEX)


def _add(cv, a: int, b: int) -> int: return cv.add("ADD", (a, b))


def _mul(cv, a: int, b: int) -> int: return cv.add("MUL", (a, b))


@INDEX_VIEW.register("RESHAPE")
def _reshape(cv, v, idx):
  """The row-major flat index over the view's dims, split again over the source's dims."""
  flat = cv.const(0, "index")
  for k, (d, i) in enumerate(zip(v.shape, idx)):
    flat = i if k == 0 else _add(cv, _mul(cv, flat, (yield from _dim(cv, d))), i)
  src = tuple(v.src[0].shape)
  if len(src) == 1: return [flat]
  out, inner = [], None   # inner: the product of the source's dims after axis k
  for d in reversed(src):
    q = flat if inner is None else cv.add("IDIV", (flat, inner))
    dn = yield from _dim(cv, d)
    out.append(cv.add("MOD", (q, dn)))
    inner = dn if inner is None else _mul(cv, inner, dn)
  return out[::-1]


@INDEX_VIEW.register("SHRINK")
def _shrink(cv, v, idx):
  """Each index moved by the window's offset on its axis."""
  offs = v.src[1].src if v.src[1].op.name == "STACK" else (v.src[1],)
  out = []
  for i, o in zip(idx, offs):
    out.append(i if o.op.name == "CONST" and o.arg == 0 else _add(cv, i, (yield o, INDEX)))
  return out
