"""tinygrad UOps -> tinyspec graphs, driven by interop/tinygrad_map.yaml.

    g, report = import_uops([tensor.uop], level="tensor")    # the realized tensors
    g, report = import_uops([call.src[0]], level="kernel")   # a scheduled kernel's SINK
    g, report = import_program(to_program(ast, renderer))    # a lowered PROGRAM

How it works: a demand-driven walk from the roots. Each tinygrad UOp is converted in a
*context* (what its consumer needs from it): a value of some dtype, a shape operand, a
scalar index, a RANGE, or a store target. The map table names, per op, how its arg
converts and which *form* builds it; each form is one converter below (registered in
FORMS under the form's name) that asks for its sources (`yield source, context`) and
returns the index of the node it made. The walk
drives the generators with an explicit stack, so graphs of any depth import without
recursion (tinyspec/walk.py), and nodes are hash-consed (the same op, sources and arg give one node).

What the table does not map is counted in the ImportReport and kept under tinygrad's name,
so the validator names it too. tinygrad's dtypes and (at tensor level) shapes are written
on the nodes as declared dtype/shape: the validator then checks that the spec derives
the same properties tinygrad does (rules declared.dtype, declared.shape).
"""
from __future__ import annotations
import base64
import math
import re
from tinyspec.dispatch import Registry
from tinyspec.frozen import key as _key
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.walk import drive
from tinyspec.interop.tinygrad_contexts import V, SHAPE, INDEX, RANGE, TARGET
from tinyspec.interop import tinygrad_arith, tinygrad_assign, tinygrad_calls, tinygrad_multi
from tinyspec.interop.importreport import ImportReport
from tinyspec.interop.tinygrad_map import is_invalid, is_weak, mapping, result_slot, slot_group, source_language
from tinyspec.interop.tinygrad_symbolic import bound_dims, bound_value
from tinyspec.dtypes import canonical, dtype as spec_dtype

FORMS = Registry("tinygrad import form", ops=False)   # form name of the map table -> its converter
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Converter:
  def __init__(self, level: str, device: str | None = None, declare: bool = True, default_float: str | None = None):
    self.level, self.device, self.declare = level, device, declare
    self.language = source_language(device) if level == "program" else None   # of a SOURCE
    self.m, self.T = mapping(), tables()
    self.weak = {**self.m["weak"], **({"weakfloat": default_float} if default_float else {})}   # DEFAULT_FLOAT at the realize
    self.nodes: list[Node] = []
    self._hc: dict = {}            # hash-consing: (op, src, arg, dtype, shape) -> node index
    self.memo: dict = {}           # (uop, context) -> node index
    self.masks: dict = {}          # INDEX node made in TARGET context -> its mask node
    self.report = ImportReport()
    self.range_ids: dict = {}
    self.slots_used: set = set()   # ParamArg slots of the graph (variables are numbered after them)
    self.var_slots: dict = {}
    self.devices = None               # the tuple of devices a multi-device kernel runs on (one graph per device)
    self.whole_buffers: set = set()   # BUFFERs on a tuple of devices at the size of all their shards (interop/tinygrad_multi.py)

  # ---- nodes
  def add(self, op: str, src=(), arg=None, dtype=None, shape=None) -> int:
    k = (op, tuple(src), _key(arg), dtype, None if shape is None else tuple(shape))
    if (i := self._hc.get(k)) is None:
      i = self._hc[k] = len(self.nodes)
      self.nodes.append(Node(op, src, arg, dtype if self.declare else None, shape if self.declare else None))
    return i

  def const(self, value, dtype: str) -> int:
    return self.add("CONST", (), {"value": _const_value(value, dtype), "dtype": dtype})

  # ---- the walk
  def convert(self, root, ctx) -> int:
    return drive((root, ctx), lambda k: self._form(*k), self.memo)

  def entry(self, u) -> dict:
    return self.m["ops"].get(u.op.name) or {}

  def _form(self, u, ctx):
    if ctx == SHAPE: return self.shape_operand(u)
    if ctx == INDEX: return self.index_scalar(u)
    e = self.entry(u)
    form = e.get("form", "plain")
    if isinstance(form, dict): form = form.get(self.level, "plain")
    if u.op.name in self.m["unmapped"] or (u.op.name not in self.m["ops"] and u.op.name not in self.T.ops):
      form = "unmapped"
    return FORMS[form](self, u, ctx)

  # ---- names, dtypes, args
  def op_name(self, u) -> str:
    e = self.entry(u)
    name = e.get("op", u.op.name)
    if name != u.op.name: self.report.renamed[f"{u.op.name} -> {name}"] += 1
    return name

  def dtype_of(self, u, ctx=None) -> str:
    """The tinyspec dtype u gets in ctx (weak dtypes adopt the context's)."""
    if is_weak(u.dtype):
      if ctx is not None and ctx[0] == "v" and ctx[1] is not None: return ctx[1]
      return self.weak[u.dtype.name]
    d = self.m["dtypes"].get(u.dtype.name)
    if d is None:
      self.report.unmapped[f"dtype {u.dtype.name}"] += 1
      return u.dtype.name
    return d

  def src_ctx(self, u, k: int, op: str, dtype: str):
    """The context of u.src[k] when u becomes tinyspec op `op` with dtype `dtype`: a weak source adopts
    the dtype of its slot group, or of the node it is converted to (`weak`, `weak_converted` in the map table)."""
    s = u.src[k]
    od = self.T.ops.get(op)
    if od is None: return V()
    slot = od.slot_for(k)
    if slot.kind == "shape": return SHAPE
    if slot.kind == "range": return RANGE
    if not is_weak(s.dtype) and not is_invalid(s): return V()
    group = slot_group(od, slot.name)
    for j, t in enumerate(u.src):   # Invalid's dtype matches any: no partner to adopt from
      if j != k and od.slot_for(j).name in group and not is_weak(t.dtype) and not is_invalid(t) and t.dtype.name in self.m["dtypes"]:
        return V(self.m["dtypes"][t.dtype.name])
    if (follows := result_slot(od)) is not None and follows in group: return V(dtype)
    if op in self.m["weak_converted"] and is_weak(s.dtype) and spec_dtype(dtype).cls == spec_dtype(self.weak[s.dtype.name]).cls: return V(dtype)
    return V(self.weak[s.dtype.name]) if is_weak(s.dtype) else V(dtype)

  def declared(self, u, dtype):
    """(dtype, shape) to declare on u's node: tinygrad's view of it."""
    shape = self.shape_of(u) if self.level == "tensor" else None   # None: shapeless or an unbound dim, nothing to declare
    return (None if dtype == "void" else dtype), shape

  def declared_as(self, dtype, shape):
    """(dtype, shape) to declare on a node the import makes (shape at tensor level only)."""
    return dtype, (tuple(shape) if self.level == "tensor" else None)

  def adopt(self, s, dtype):
    """The context of a source s of a node of `dtype` whose slot shares its dtype: a weak
    source (and tinygrad's Invalid, whose dtype matches any) adopts dtype."""
    return V(dtype) if is_weak(s.dtype) or is_invalid(s) else V()

  def arg_of(self, u, dtype):
    kind = self.entry(u).get("arg", "none")
    a = u.arg
    if kind == "none":
      if a is not None: self.report.unmapped[f"{u.op.name} arg {type(a).__name__}"] += 1
      return None
    if kind == "dtype":   # a conversion to a weak dtype converts to the dtype its node adopts
      return dtype if is_weak(a) else self.m["dtypes"].get(a.name) or self._unmapped_dtype(a)
    if kind == "list": return list(a)
    if kind == "int": return int(a)
    if kind == "name": return {"name": str(a)}
    if kind == "device": return {"device": _device(a)}
    if kind == "kernel_info":
      if a is None: return None
      info = {"name": _ANSI.sub("", str(getattr(a, "name", "")))}
      opts = getattr(a, "applied_opts", ())
      if opts: info["opts"] = [repr(o) for o in opts]
      return info
    if kind == "call_info":
      if a is not None: self.report.forms[f"{u.op.name} arg (CallInfo) dropped"] += 1
      return None
    if kind == "source": return {"text": str(a), "language": self.language}
    if kind == "binary": return {"data": base64.b64encode(bytes(a)).decode()}
    raise ValueError(f"interop/tinygrad_map.yaml: unknown arg kind {kind!r} for {u.op.name}")

  def _unmapped_dtype(self, dt) -> str:
    self.report.unmapped[f"dtype {dt.name}"] += 1
    return dt.name

  # ---- forms (yield (source, context), get the node index back; return the node's index)
  @FORMS.register("plain")
  def plain_form(self, u, ctx):
    op, dtype = self.op_name(u), self.dtype_of(u, ctx)
    if dtype == "bool" and op in self.m.get("bool_ops", {}):   # tinygrad's ADD/MUL of bools are OR/AND (decision bool-arith)
      self.report.forms[f"bool {op} as {self.m['bool_ops'][op]}"] += 1
      op = self.m["bool_ops"][op]
    srcs = []
    for k, s in enumerate(u.src): srcs.append((yield s, self.src_ctx(u, k, op, dtype)))
    return self.add(op, srcs, self.arg_of(u, dtype), *self.declared(u, dtype))

  @FORMS.register("unmapped")
  def unmapped_form(self, u, ctx):
    self.report.unmapped[f"op {u.op.name}"] += 1
    srcs = []
    for s in u.src: srcs.append((yield s, V()))
    arg = None if u.arg is None else _jsonable(u.arg)
    return self.add(u.op.name, srcs, arg)

  @FORMS.register("const")
  def const_form(self, u, ctx):
    dtype = self.dtype_of(u, ctx)
    if is_invalid(u):
      if ctx[0] == "v" and ctx[1] is not None:   # a value whose dtype its consumer gives (see `const` in the map table)
        self.report.forms["Invalid as a value: zero"] += 1
        return self.const(0, ctx[1])
      self.report.unmapped["Invalid where tinygrad leaves the value undefined"] += 1
      return self.add("CONST", (), {"value": "Invalid", "dtype": dtype})
    return self.add("CONST", (), {"value": _const_value(u.arg, dtype), "dtype": dtype}, *self.declared(u, dtype))

  @FORMS.register("define")
  def define_form(self, u, ctx):
    """PARAM / BUFFER with a ParamArg."""
    a, dtype = u.arg, self.dtype_of(u, ctx)
    if a.addrspace is not None and a.addrspace.name == "ALU":   # a symbolic variable: a scalar, not storage
      return self.variable_form(u, ctx)
    if self.level == "tensor" and (whole := tinygrad_multi.whole_buffer(self, u)) is not None:   # one device's size: all n
      return (yield from tinygrad_multi.replicated(self, u, whole, ctx))
    arg = {"slot": int(a.slot), "dtype": dtype}
    sharded = u.op.name == "PARAM" and a.axis is not None and isinstance(a.device, tuple)   # of a sharded argument, or
    traced = sharded or (u.op.name == "PARAM" and isinstance(a.device, tuple) and self.level == "tensor")   # a replicated one:
    dev = None if traced else a.device   # in a traced body, the spec takes its device and axis from the argument
    if self.level != "tensor" and isinstance(dev, tuple) and self.device in dev: dev = self.device   # one device's kernel
    if traced: self.report.forms[f"PARAM of a {'sharded' if sharded else 'replicated'} argument: its device and axis the argument's"] += 1
    if dev is None and u.op.name == "BUFFER":
      dev = self.device or "CPU"
      self.report.forms["BUFFER without a device takes the kernel's"] += 1
    if dev is not None: arg["device"] = _device(dev)
    if a.addrspace is not None and a.addrspace.name != "GLOBAL":
      sp = self.m["addrspaces"].get(a.addrspace.name)
      if sp is None: self.report.unmapped[f"AddrSpace {a.addrspace.name}"] += 1
      arg["addrspace"] = sp or a.addrspace.name
    if a.name is not None: arg["name"] = str(a.name)
    self._unplaced_fields(a, axis_placed=sharded)
    srcs = [(yield u.src[0], SHAPE)] if u.src else [self.add("VCONST", (), {"values": [], "dtype": "index"})]
    if a.vmin_vmax is not None:
      srcs += [self.const(a.vmin_vmax[0], dtype), self.const(a.vmin_vmax[1], dtype)]
    elif len(u.src) > 1:
      self.report.unmapped[f"{u.op.name} with {len(u.src)} sources"] += 1
      for s in u.src[1:]: srcs.append((yield s, V()))
    return self.add(self.op_name(u), srcs, arg, *self.declared(u, dtype))

  @FORMS.register("variable")
  def variable_form(self, u, ctx):
    """tinygrad's Variable (a ParamArg in address space ALU, vmin_vmax its range): the spec's
    symbolic size, a ()-shaped integer PARAM with (min, max) sources. tinygrad gives an
    unbound variable slot -1: it is numbered after the graph's other slots."""
    a, dtype = u.arg, self.dtype_of(u, ctx)
    if a.name in self.m["runtime_vars"] and a.vmin_vmax is not None:   # set per thread by the runtime: a thread index
      self.report.forms["runtime variable as SPECIAL"] += 1
      return self._index_typed(u, ctx, self.add("SPECIAL", (self.const(int(a.vmin_vmax[1]) + 1, "index"),), {"name": self.m["runtime_vars"][a.name]}))
    self.report.forms["variable"] += 1
    slot = int(a.slot) if a.slot >= 0 else self.free_slot(u)
    arg = {"slot": slot, "dtype": dtype, **({"name": str(a.name)} if a.name is not None else {})}
    self._unplaced_fields(a)
    lo, hi = a.vmin_vmax if a.vmin_vmax is not None else (None, None)
    srcs = [self.add("VCONST", (), {"values": [], "dtype": "index"})]
    if lo is not None: srcs += [self.const(lo, dtype), self.const(hi, dtype)]
    return self.add("PARAM", srcs, arg, dtype)

  def free_slot(self, u) -> int:
    if u not in self.var_slots: self.var_slots[u] = 1 + max([*self.slots_used, *self.var_slots.values(), -1])
    return self.var_slots[u]

  def _unplaced_fields(self, a, axis_placed: bool = False) -> None:
    """Report the ParamArg fields the spec has no place for."""
    if a.axis is not None and not axis_placed: self.report.unmapped["ParamArg.axis"] += 1
    if a.multiple_of not in (None, 1): self.report.unmapped["ParamArg.multiple_of"] += 1
    if a.volatile: self.report.unmapped["ParamArg.volatile"] += 1

  @FORMS.register("shaped")
  def shaped_form(self, u, ctx):
    """RESHAPE / PAD / SHRINK at tensor level: sources after the first are shape operands."""
    op, dtype = self.op_name(u), self.dtype_of(u, ctx)
    srcs = [(yield u.src[0], self.adopt(u.src[0], dtype))]
    for s in u.src[1:]: srcs.append((yield s, SHAPE))
    return self.add(op, srcs, None, *self.declared(u, dtype))

  @FORMS.register("expand")
  def expand_form(self, u, ctx):
    """tinygrad's EXPAND(x, dims) prepends the axes `dims` (shape = dims + x.shape); the
    spec's keeps the rank: RESHAPE(x, (1,)*k + x.shape), then EXPAND to the full shape."""
    dtype = self.dtype_of(u, ctx)
    x = yield u.src[0], self.adopt(u.src[0], dtype)
    src_shape, shape = self.shape_of(u.src[0]), self.shape_of(u)
    if src_shape is None or shape is None:
      self.report.unmapped["EXPAND of a symbolic shape"] += 1
      return self.add("EXPAND", (x, (yield u.src[1], SHAPE)), None)
    self.report.forms["expand"] += 1
    if len(shape) > len(src_shape):
      x = self.add("RESHAPE", (x, self.vshape((1,) * (len(shape) - len(src_shape)) + src_shape)), None, dtype)
    return self.add("EXPAND", (x, self.vshape(shape)), None, *self.declared(u, dtype))

  @FORMS.register("reduce")
  def reduce_form(self, u, ctx):
    dtype = self.dtype_of(u, ctx)
    rop, n = u.arg[0].name, int(u.arg[1])
    x = yield u.src[0], self.adopt(u.src[0], dtype)
    negate = False
    if dtype == "bool" and (b := self.m.get("bool_reduce", {}).get(rop)):   # OR and AND of bools (decision bool-arith)
      self.report.forms[f"bool REDUCE {rop} as {'NOT MAX NOT' if b.get('negate') else b['op']}"] += 1
      rop, negate = b["op"], bool(b.get("negate"))
      if negate: x = self.add("NOT", (x,), None, *self.declared_as(dtype, self.shape_of(u.src[0])))
    if self.level == "tensor":
      self.report.forms["reduce"] += 1
      r = self.add("REDUCE", (x,), {"op": rop, "axes": list(range(n))}, dtype)
      if negate: r = self.add("NOT", (r,), None, dtype)
      return self.add("RESHAPE", (r, (yield from self.dims_operand(self.shape_of(u) or tuple(u.shape)))), None, *self.declared(u, dtype))
    if n: self.report.unmapped["REDUCE over axes inside a kernel"] += 1
    rngs = []
    for s in u.src[1:]: rngs.append((yield s, RANGE))
    r = self.add("REDUCE", [x, *rngs], {"op": rop, **({"axes": list(range(n))} if n else {})}, dtype)
    return self.add("NOT", (r,), None, dtype) if negate else r

  def shape_of(self, u):
    """u's shape as integers (a dim of a bound variable at its value); None if it has none."""
    try: concrete = tuple(int(d) for d in u.shape)
    except Exception: concrete = None   # noqa: BLE001 (symbolic or shapeless)
    if concrete is not None: return concrete
    return self.bound(bound_dims(u))

  @FORMS.register("range")
  def range_form(self, u, ctx):
    bound = yield u.src[0], INDEX
    if len(u.src) > 1: self.report.forms["RANGE nesting sources dropped"] += 1
    *ids, axis = u.arg
    if axis.name == "DEVICE" and self.level != "tensor" and (d := tinygrad_multi.device_number(self, u)) is not None:
      return self._index_typed(u, ctx, self.const(d, "index"))   # one device's kernel: its number among the devices
    ty = self.m["axis_types"].get(axis.name)
    if ty is None:
      self.report.unmapped[f"AxisType {axis.name}"] += 1
      ty = axis.name
    return self._index_typed(u, ctx, self.add("RANGE", (bound,), {"id": self.range_ids[tuple(ids)], "type": ty}))

  @FORMS.register("special")
  def special_form(self, u, ctx):
    bound = yield u.src[0], INDEX
    return self._index_typed(u, ctx, self.add("SPECIAL", (bound,), self.arg_of(u, "index")))

  def _index_typed(self, u, ctx, node: int) -> int:
    """A RANGE/SPECIAL (always index in the spec) that tinygrad typed otherwise (int32 in a
    lowered program): CAST where it is used as a value."""
    if ctx == RANGE or is_weak(u.dtype) or self.dtype_of(u) == "index": return node
    self.report.forms[f"{u.op.name} typed int (CAST where used as a value)"] += 1
    return self.add("CAST", (node,), self.dtype_of(u), self.dtype_of(u))

  @FORMS.register("end")
  def end_form(self, u, ctx):
    body = yield u.src[0], V()
    rngs = []
    for s in u.src[1:]: rngs.append((yield s, RANGE))
    return self.add("END", [body, *rngs])

  @FORMS.register("index")
  def index_form(self, u, ctx):
    """INDEX(buf, i...); an index WHERE(valid, i, Invalid) is a masked access."""
    dtype, chain = self.dtype_of(u, ctx), tinygrad_calls.view_chain(self, u)
    view = chain[0] if chain is not None else u.src[0]   # a kernel's INDEX of views of B: B, at the index they map to
    buf = yield view, self.adopt(view, dtype)
    idx, masks = [], []
    for s in u.src[1:]:
      i, m_ = yield from self.masked_index(s)
      idx.append(i)
      if m_ is not None: masks.append(m_)
    if chain is not None: idx = yield from tinygrad_calls.through_views(self, chain[1], idx)
    node = self.add("INDEX", [buf, *idx], None, *self.declared(u, dtype))
    return self.masked(node, masks, ctx, dtype)

  def masked_index(self, s):
    """(the index, its mask or None): tinygrad writes a masked index WHERE(valid, i, Invalid)."""
    if s.op.name != "WHERE" or not is_invalid(s.src[2]): return (yield s, V()), None
    return (yield s.src[1], V()), (yield s.src[0], V())

  def masked(self, node: int, masks: list, ctx, dtype: str, width: int | None = None) -> int:
    """An access through masked indices: a store target keeps the mask for its gate, a read
    is LOAD(access, 0, mask) (tinygrad's gater: a masked read gives 0; a window of `width`
    elements reads a vector of zeros)."""
    if not masks: return node
    mask = masks[0]
    for m_ in masks[1:]: mask = self.add("AND", (mask, m_))
    if ctx == TARGET:
      self.report.forms["index (masked store)"] += 1
      self.masks[node] = mask
      return node
    self.report.forms["index (masked read)"] += 1
    zero = self.const(0, dtype) if width is None else self.add("VCONST", (), {"values": [_const_value(0, dtype)] * width, "dtype": dtype})
    return self.add("LOAD", (node, zero, mask), None, dtype)

  @FORMS.register("store")
  def store_form(self, u, ctx):
    if tinygrad_assign.stores_invalid(u):   # outside an AFTER (which drops it): a STORE with no value, refused (arg.schema)
      self.report.unmapped["STORE of Invalid outside an AFTER"] += 1
      val = tinygrad_arith.filled(self, "Invalid", self.dtype_of(u.src[0]), u.src[1])
      return self.add("STORE", [(yield u.src[0], TARGET), val])
    if self.level == "tensor" and u.src[0].op.name != "INDEX":   # an INDEX target: a kernel's store (a custom kernel's CALL body)
      return (yield from tinygrad_assign.store(self, u))
    tdtype = self.dtype_of(u.src[0])
    val = yield u.src[1], self.adopt(u.src[1], tdtype)
    target = yield u.src[0], TARGET
    gates = [self.masks[target]] if target in self.masks else []
    for s in u.src[2:]: gates.append((yield s, V()))
    if len(gates) > 1: gates = [self.add("AND", tuple(gates))]
    if target in self.masks: self.report.forms["store (mask as gate)"] += 1
    return self.add("STORE", [target, val, *gates])

  @FORMS.register("after")
  def after_form(self, u, ctx):
    """AFTER at tensor level: over a tensor that is not storage, the value its assigns give it
    (interop/tinygrad_assign.py); otherwise the plain form."""
    if (kept := tinygrad_assign.without_invalid_stores(self, u)) is None: return (yield u.src[0], ctx)
    u = kept
    base = tinygrad_assign.target_chain(u.src[0])[0]
    if not tinygrad_assign.is_storage(base):
      made = yield from tinygrad_assign.after(self, u)
      if made is not None: return made
      self.report.unmapped[f"AFTER of a {base.op.name} (not storage) ordered after something other than its assigns"] += 1
    return (yield from self.plain_form(u, ctx))

  @FORMS.register("stack")
  def stack_form(self, u, ctx):
    dtype = self.dtype_of(u, ctx)
    srcs = []
    for s in u.src: srcs.append((yield s, self.adopt(s, dtype)))
    if not srcs: return self.add("VCONST", (), {"values": [], "dtype": dtype if dtype != "void" else "index"})
    return self.add("STACK", srcs, None, *self.declared(u, dtype))

  @FORMS.register("load")
  def load_form(self, u, ctx):
    dtype = self.dtype_of(u, ctx)
    srcs = [(yield u.src[0], V())]
    for k, s in enumerate(u.src[1:], 1): srcs.append((yield s, self.adopt(s, dtype) if k == 1 else V()))
    return self.add("LOAD", srcs, None, dtype)

  @FORMS.register("window")
  def window_form(self, u, ctx):
    """SHRINK(buf, offset, k) inside a kernel: INDEX(buf, offset + [0..k-1]); a masked offset
    (WHERE(valid, i, Invalid)) masks the whole window, as for INDEX."""
    self.report.forms["window"] += 1
    buf = yield u.src[0], V()
    off_dtype = self.dtype_of(u.src[1])
    off, mask = yield from self.masked_index(u.src[1])
    k = _fold_int(u.src[2])
    if k is None:
      self.report.unmapped["SHRINK window of symbolic size"] += 1
      return self.add("SHRINK", (buf, off, (yield u.src[2], V())))
    dtype = self.dtype_of(u, ctx)
    iota = self.add("VCONST", (), {"values": list(range(k)), "dtype": off_dtype})
    node = self.add("INDEX", (buf, self.add("ADD", (off, iota))), None, dtype)
    return self.masked(node, [] if mask is None else [mask], ctx, dtype, k)

  @FORMS.register("template")
  def template_form(self, u, ctx):
    op, dtype = self.entry(u).get("op", u.op.name), self.dtype_of(u, ctx)
    srcs = {}
    od = self.T.ops[op]
    for k, s in enumerate(u.src): srcs[od.slot_for(k).name] = yield s, self.src_ctx(u, k, op, dtype)
    name = self.entry(u)["template"]
    self.report.forms[f"{u.op.name} via template {name}"] += 1
    return self.template(name, srcs, dtype)

  @FORMS.register("linear")
  def linear_form(self, u, ctx):
    for s in u.src: yield s, V()
    return self.add("LINEAR", range(len(self.nodes)))

  @FORMS.register("program")
  def program_form(self, u, ctx):
    """PROGRAM(SINK, LINEAR, SOURCE?, BINARY?) -> PROGRAM(LINEAR, SOURCE?, BINARY?)."""
    self.report.forms["program"] += 1
    parts = []
    for s in u.src[1:]: parts.append((yield s, V()))
    info = {"name": _ANSI.sub("", str(getattr(u.arg, "name", "")))} if u.arg is not None else None
    return self.add("PROGRAM", parts, info)

  # ---- helpers
  def shape_operand(self, u):
    """A shape operand: constant dims as an index CONST (one dim) or VCONST; symbolic dims
    as a STACK of index values."""
    if u.op.name == "STACK":
      dims = [self.fold(s) for s in u.src]
      if None not in dims: return self.add("VCONST", (), {"values": dims, "dtype": "index"})
      srcs = []
      for s in u.src: srcs.append((yield s, INDEX))
      return self.add("STACK", srcs)
    return (yield u, INDEX)

  def index_scalar(self, u):
    """A ()-shaped index value: a constant folds to an index CONST (tinygrad's lowered
    programs write CAST(CONST) in int32); anything else is converted and CAST if needed."""
    v = self.fold(u)
    if v is not None:
      if u.op.name == "CAST": self.report.forms["shape/bound CAST(CONST) folded to index"] += 1
      return self.const(v, "index")
    x = yield u, V("index")
    if self.dtype_of(u, V("index")) == "index": return x
    return self.add("CAST", (x,), "index", "index")

  def fold(self, u) -> int | None:
    """The integer a CONST (or CAST of one) holds, or a dim over bound variables at their values."""
    v = _fold_int(u)
    return v if v is not None else self.bound(bound_value(u))

  def bound(self, v):
    """v, a shape or a dim taken at the bound variables' values: reported."""
    if v is not None: self.report.forms["symbolic dim of a bound variable as its bound value"] += 1
    return v

  def dims_operand(self, dims):
    """A shape operand of dims, each an int or a symbolic tinygrad UOp: over bound variables
    its bound value (`shape`), else converted as an index value (never asked for a number,
    which a symbolic UOp has not)."""
    dims = [d if isinstance(d, int) or (v := bound_value(d)) is None else self.bound(v) for d in dims]
    if all(isinstance(d, int) for d in dims): return self.vshape(dims)
    srcs = []
    for d in dims: srcs.append(self.const(d, "index") if isinstance(d, int) else (yield d, INDEX))
    return self.add("STACK", srcs)

  def vshape(self, dims) -> int:
    return self.add("VCONST", (), {"values": [int(d) for d in dims], "dtype": "index"})

  def template(self, name: str, inputs: dict, dtype: str) -> int:
    """Instantiate a template of the map table (step lists: {as, op, src, arg})."""
    t = self.m["templates"][name]
    env, last = dict(inputs), None
    for step in t["steps"]:
      srcs = [self.const(s["const"], s.get("dtype", dtype)) if isinstance(s, dict) else env[s] for s in step["src"]]
      arg = step.get("arg")
      if arg == "$dtype": arg = dtype
      last = self.add(step["op"], srcs, arg)
      if "as" in step: env[step["as"]] = last
    return last

  def number_ranges(self, roots) -> None:
    """RANGE ids: tinygrad's single-int ids when all are, else numbered in sorted order.
    Also notes the ParamArg slots in use."""
    topo = _toposort(roots)
    self.slots_used = {u.arg.slot for u in topo if u.op.name in ("PARAM", "BUFFER") and getattr(u.arg, "slot", -1) >= 0}
    self.devices = next((d for u in topo if isinstance(d := getattr(u.arg, "device", None), tuple)), None)   # a multi-device kernel's
    ids = sorted({tuple(u.arg[:-1]) for u in topo if u.op.name == "RANGE"})
    simple = all(len(i) == 1 and isinstance(i[0], int) and i[0] >= 0 for i in ids)
    self.range_ids = {i: (i[0] if simple else n) for n, i in enumerate(ids)}
    if not simple: self.report.forms["RANGE ids renumbered"] += len(ids)


# forms written in their own modules: functions of (converter, uop, context), as the methods above
for _name, _form in (("implicit_cast", tinygrad_arith.implicit_cast), ("pow", tinygrad_arith.pow_form), ("trunc_div", tinygrad_arith.trunc_div),
                     ("unshard", tinygrad_multi.unshard), ("copy", tinygrad_multi.copy), ("call", tinygrad_calls.call),
                     ("function", tinygrad_calls.function), ("buffer_after", tinygrad_assign.buffer_after)):
  FORMS.register(_name)(_form)


def _toposort(roots):
  from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  return UOp.sink(*roots).toposort() if len(roots) != 1 else roots[0].toposort()


def _fold_int(u) -> int | None:
  """The integer a CONST (or CAST of one) holds, else None."""
  while u.op.name == "CAST" and len(u.src) == 1: u = u.src[0]
  if u.op.name == "CONST" and isinstance(u.arg, int) and not isinstance(u.arg, bool): return int(u.arg)
  return None


def _device(d):
  return list(d) if isinstance(d, tuple) else str(d)


def _const_value(v, dtype: str):
  """A Python constant as the file format writes it in `dtype` (ints wrap, float specials
  become strings)."""
  if canonical(dtype) is None: return _jsonable(v)   # a dtype tinyspec has none for (tinygrad's internal uint128/uint256): the import reports it unmapped
  d = spec_dtype(dtype)
  if d.cls == "float":
    f = float(v)
    if math.isnan(f): return "nan"
    if math.isinf(f): return "inf" if f > 0 else "-inf"
    return f
  if d.cls == "bool": return bool(v)
  if d.is_int:
    i = int(v)
    bits = d.itemsize * 8
    i &= (1 << bits) - 1
    if d.cls != "uint" and i >= 1 << (bits - 1): i -= 1 << bits
    return i
  return v


def _jsonable(a):
  if a is None or isinstance(a, (bool, int, float, str)): return a
  if isinstance(a, (tuple, list)): return [_jsonable(x) for x in a]
  return repr(a)


# ------------------------------------------------------------------ entry points
def import_uops(roots, level: str, device=None, declare=True, meta=None, default_float: str | None = None):
  """tinygrad UOps (the roots of one graph) -> (tinyspec Graph, ImportReport). level: tensor
  (realized tensors' UOps), kernel (a kernel SINK) or program (a LINEAR). default_float: a weak
  float's dtype (tinygrad's DEFAULT_FLOAT when the graph was made; default: the map table's)."""
  cv = _Converter(level, device, declare, default_float)
  cv.number_ranges(list(roots))
  idx = [cv.convert(r, V()) for r in roots]
  return _graph(cv, idx, level, meta), cv.report


def import_program(prg, device=None, declare=True, meta=None, default_float: str | None = None):
  """A lowered tinygrad PROGRAM (codegen.to_program) -> (program-level Graph, ImportReport)."""
  cv = _Converter("program", device, declare, default_float)
  cv.number_ranges([prg.src[1]] if len(prg.src) > 1 else [])
  root = cv.convert(prg, V())
  return _graph(cv, [root], "program", meta), cv.report


def _graph(cv: _Converter, roots: list[int], level: str, meta) -> Graph:
  r = None if roots == [len(cv.nodes) - 1] else roots   # reached(): a form may leave an operand it replaced behind
  return Graph(cv.nodes, r, level, dict(meta or {})).reached()
