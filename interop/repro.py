"""Standalone tinygrad-only repros: a small tinyspec graph written as a Python script that
imports only tinygrad and numpy, computes the failing value the way the `tinygrad` backend
did (interop/tinygrad_backend.py), prints the expected and the actual values, and exits
non-zero while tinygrad's value is outside what the spec allows.

    src = repro_source(graph, inputs, output, device, check, title)   # the script's text
    ok, why = reproduces(path, device, expect)                       # run it: does it fail as found?

A tensor-level graph becomes tinygrad Tensor API calls, one line per node (the backend's
translation: movement ops by their Tensor methods, elementwise ops by tinygrad's op of the
same meaning, `Tensor.alu` or the method of the map table's `backend.methods`). A
kernel-level graph becomes `Tensor.custom_kernel` over a kernel of UOps: the backend's own
kernel builder makes the UOps (passed in: TinygradBackend.kernel_uops) and tinygrad's
`pyrender` writes them as code.

The check (`Check`) is the fuzz's own judgement of the value: the reference's value, the
per-element bound in ulps (0: the same bits, either NaN; inf: anything) and the other results
the portable profile allows. A crash or an exception needs no check: it is the finding.
"""
from __future__ import annotations
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
import signal
import numpy as np
from tinyspec.dispatch import Registry, input_name
from tinyspec.interop.tinygrad_names import _backend_table, tg_method, tg_op
from tinyspec.tables import tables
from tinyspec.rules import shape_value
from tinyspec.validate import validate

MARK = "tinygrad bug:"   # what a value repro says when it fails (reproduces() looks for it)


class NoRepro(Exception):
  """The graph holds something a repro does not write (an op or form the generator lacks)."""


@dataclass
class Check:
  """What tinygrad's value is judged against: want (the reference), ulps (per element, or
  one number), alternatives (other allowed results, want's shape)."""
  dtype: str
  want: np.ndarray
  ulps: object = 0.0
  alternatives: list = field(default_factory=list)


# ------------------------------------------------------------------ literals
def _tg(name: str, kernel: bool = False) -> str:
  """`dtypes.NAME` of a tinyspec dtype: the attribute tinygrad_names.tg_dtype looks up."""
  B = _backend_table()
  return f"dtypes.{(B['kernel_dtypes'] if kernel else {}).get(name) or B['dtypes'].get(name, name)}"


def _np_name(dt: str) -> str:
  return {"index": "int64", "bfloat16": "uint16"}.get(dt, dt)


def _literal(a: np.ndarray, dt: str) -> str:
  """numpy code for an array of dtype dt, bit for bit (bfloat16 as its uint16 bits; float
  NaNs other than the default one as bits)."""
  a = np.asarray(a)
  shape = tuple(int(d) for d in a.shape)
  if dt == "bfloat16": a = np.ascontiguousarray(a).view(np.uint16)
  flat = a.reshape(-1)
  if a.dtype.kind == "f":
    ui = np.dtype(f"uint{a.dtype.itemsize * 8}")
    nan_bits = np.array(np.nan, a.dtype).view(ui)
    if any(math.isnan(float(x)) and np.asarray(x, a.dtype).view(ui) != nan_bits for x in flat):
      return f"np.array({[int(v) for v in flat.view(ui)]}, np.{ui.name}).view(np.{a.dtype.name}).reshape({shape})"
    vals = ", ".join(_float(float(x)) for x in flat)
  elif a.dtype == np.bool_: vals = ", ".join(str(bool(x)) for x in flat)
  else: vals = ", ".join(str(int(x)) for x in flat)
  return f"np.array([{vals}], np.{_np_name(dt) if dt != 'bfloat16' else 'uint16'}).reshape({shape})"


def _float(f: float) -> str:
  if math.isnan(f): return "np.nan"
  if math.isinf(f): return "np.inf" if f > 0 else "-np.inf"
  return repr(f)


def _tensor(a, dt: str, shape) -> str:
  lit = _literal(np.asarray(a).reshape(shape), dt)
  if dt == "bfloat16": return f"Tensor({lit}, device=DEV).bitcast(dtypes.bfloat16)"
  return f"Tensor({lit}, device=DEV, dtype={_tg(dt)})"


def _const(v, dt: str) -> str:
  if isinstance(v, str): return {"nan": "math.nan", "inf": "math.inf", "-inf": "-math.inf"}[v]
  if dt == "bool": return str(bool(v))
  return repr(v)


# ------------------------------------------------------------------ tensor level
TENSOR_CODE = Registry("tinygrad repro line")   # op -> the expression that computes it, as the backend's TENSOR_OPS builds it


class _TensorCode:
  """The backend's TensorBuilder as code: one line per node the output needs."""

  def __init__(self, graph, views, inputs):
    self.g, self.views, self.inputs, self.T = graph, views, inputs, tables()
    self.lines: list[str] = []
    self.done: dict[int, str] = {}

  def shape(self, i: int) -> tuple:
    return tuple(int(d) for d in shape_value(self.views[i]))

  def var(self, i: int) -> str:
    """The variable holding node i's Tensor (its line written first, its sources before it)."""
    order, stack = [], [(i, False)]
    while stack:
      j, ready = stack.pop()
      if j in self.done: continue
      if ready: order.append(j); self.done[j] = f"x{j}"; continue
      stack.append((j, True))
      stack += [(s, False) for s in self.value_sources(j) if s not in self.done]
    for j in order: self.lines.append(f"x{j} = {self.expr(j)}")
    return self.done[i]

  def value_sources(self, j: int) -> list[int]:
    n = self.g.nodes[j]
    od = self.T.ops[n.op]
    return [s for k, s in enumerate(n.src) if od.slot_for(k).kind == "value"]

  def expr(self, i: int) -> str:
    """The expression computing node i (its sources are x{j} variables already written)."""
    n = self.g.nodes[i]
    write = TENSOR_CODE.get(n.op)
    if write is None: raise NoRepro(f"node {i} ({n.op}) is not written in a tensor-level repro")
    return write(self, i, n, [self.done.get(j, "") for j in n.src])

  # ---- sources
  @TENSOR_CODE.register("BUFFER", "PARAM")
  def buffer(self, i, n, s):
    v, name = self.views[i], input_name(n.op, n.arg)
    if name in self.inputs: return _tensor(self.inputs[name], v.dtype, v.shape)
    return f"Tensor.zeros(*{tuple(v.shape)}, dtype={_tg(v.dtype)}, device=DEV).contiguous()"

  @TENSOR_CODE.register("CONST")
  def const(self, i, n, s): return f"Tensor({_const(n.arg['value'], n.arg['dtype'])}, dtype={_tg(n.arg['dtype'])}, device=DEV)"

  @TENSOR_CODE.register("VCONST")
  def vconst(self, i, n, s):
    return f"Tensor({[_const(x, n.arg['dtype']) for x in n.arg['values']]}, dtype={_tg(n.arg['dtype'])}, device=DEV)".replace("'", "")

  # ---- movement
  @TENSOR_CODE.register("RESHAPE")
  def reshape(self, i, n, s): return f"{s[0]}.reshape({self.shape(n.src[1])})"

  @TENSOR_CODE.register("EXPAND")
  def expand(self, i, n, s): return f"{s[0]}.expand({self.shape(n.src[1])})"

  @TENSOR_CODE.register("PAD")
  def pad(self, i, n, s):
    o, t, d = self.shape(n.src[1]), self.shape(n.src[2]), self.views[n.src[0]].shape
    return f"{s[0]}.pad({tuple((a, b - a - k) for a, b, k in zip(o, t, d))})"

  @TENSOR_CODE.register("SHRINK")
  def shrink(self, i, n, s):
    o, k = self.shape(n.src[1]), self.shape(n.src[2])
    return f"{s[0]}.shrink({tuple((a, a + m) for a, m in zip(o, k))})"

  @TENSOR_CODE.register("PERMUTE")
  def permute(self, i, n, s): return f"{s[0]}.permute({tuple(n.arg)})"

  @TENSOR_CODE.register("FLIP")
  def flip(self, i, n, s):
    axes = tuple(k for k, f in enumerate(n.arg) if f)
    return f"{s[0]}.flip({axes})" if axes else s[0]

  @TENSOR_CODE.register("STACK")
  def stack(self, i, n, s): return f"Tensor.stack({', '.join(s)})"

  @TENSOR_CODE.register("BITCAST")
  def bitcast(self, i, n, s): return f"{s[0]}.bitcast({_tg(n.arg)})"

  @TENSOR_CODE.register("INDEX")
  def index(self, i, n, s):
    """The backend's outer indexing, a negative index masked to 0 (index-oob); one index only."""
    if len(n.src) != 2: raise NoRepro(f"node {i} ({n.op}) is not written in a tensor-level repro")
    idx, rest = s[1], len(self.views[n.src[0]].shape) - 1
    return f"({idx} < 0).reshape(*{idx}.shape, *[1] * {rest}).where({s[0]}[{idx}].zeros_like(), {s[0]}[{idx}])"

  # ---- reduce, markers, elementwise
  @TENSOR_CODE.register("REDUCE")
  def reduce(self, i, n, s):
    axes = tuple(n.arg.get("axes", ()))
    return f"{s[0]}._rop(Ops.{n.arg['op']}, {axes}).reshape({tuple(self.views[i].shape)})" if axes else s[0]

  @TENSOR_CODE.register(category="marker")
  def marker(self, i, n, s): return f"{s[0]}.{tg_method(n.op)}()"

  @TENSOR_CODE.register(category="decomposed")
  @TENSOR_CODE.register(category="elementwise")
  def alu(self, i, n, s):
    """As tinygrad_names.apply_alu builds it, the sources broadcast to the node's shape."""
    shape = tuple(self.views[i].shape)
    xs = [x if tuple(self.views[j].shape) == shape else f"{x}._broadcast_to({shape})" for j, x in zip(n.src, s)]
    if n.op == "CAST": return f"{xs[0]}.cast({_tg(n.arg)})"
    if (method := tg_method(n.op)) is not None: return f"{xs[0]}.{method}({', '.join(xs[1:])})"
    if tg_op(n.op) is None: raise NoRepro(f"{n.op}: no tinygrad op")
    return f"{xs[0]}.alu(Ops.{tg_op(n.op).name}{''.join(', ' + x for x in xs[1:])})"


def _tensor_lines(graph, views, inputs, node: int) -> tuple[list[str], str]:
  c = _TensorCode(graph, views, inputs)
  x = c.var(node)
  return c.lines, x


# ------------------------------------------------------------------ kernel level
def _kernel_lines(graph, res, inputs, kernel_uops) -> tuple[list[str], list[tuple[str, str, tuple]]]:
  """(lines defining `kernel(*params)` and the input tensors `ins`, [(input name, dtype,
  shape) per PARAM slot]) for a kernel-level graph: kernel_uops(graph, res, inputs) is the
  backend's kernel builder (TinygradBackend.kernel_uops), tinygrad's pyrender writes it."""
  from tinygrad.uop.render import pyrender  # noqa: PLC0415 (tinygrad, an optional dependency)
  try: sink, slots = kernel_uops(graph, res, inputs)
  except NotImplementedError as e: raise NoRepro(str(e)) from None
  body = []
  for line in pyrender(sink).splitlines():
    m = re.match(r"^(\w+) = UOp\(Ops\.PARAM, .*ParamArg\((\d+), ", line)
    body.append(f"  {m.group(1)} = params[{m.group(2)}]" if m else f"  {line}")
  lines = ["def kernel(*params):   # the kernel's UOps (tinygrad's pyrender of what the backend built)", *body, "  return ast", "", "ins = ["]
  for name, dt, sh in slots:
    n = int(np.prod(sh))
    if name is None or name not in inputs: lines.append(f"  Tensor.zeros({n}, dtype={_tg(dt)}, device=DEV).contiguous(),")
    else: lines.append(f"  {_tensor(inputs[name], dt, (n,))},")
  lines += ["]", "outs = Tensor.custom_kernel(*[t.contiguous() for t in ins], fxn=kernel)", "Tensor.realize(*outs)"]
  return lines, slots


# ------------------------------------------------------------------ the script
_CHECK = '''
def ordered(bits, width):   # float bits as integers in the order of the values (+0 and -0 one apart)
  b = bits.astype(np.int64)
  return np.where(b >> (width - 1) & 1, -(b & ((1 << (width - 1)) - 1)) - 1, b)

def as_float(b, dtype):
  return (b.astype(np.uint32) << 16).view(np.float32) if dtype == "bfloat16" else b.view(dtype)

def bits(a):   # a float array's bits (bfloat16 comes as its uint16 bits already)
  return a if a.dtype.kind in "ui" else a.view(f"uint{8 * a.dtype.itemsize}")

def acceptable(got, want, ulps, dtype):   # the same bits (any NaN for a NaN), within ulps, or anything where ulps is inf
  if dtype == "bool" or not dtype.startswith(("float", "bfloat")): return (got == want) | np.isinf(ulps)
  gb, wb = bits(got), bits(want)
  width = 8 * gb.dtype.itemsize
  g, w = as_float(gb, dtype).astype(np.float64), as_float(wb, dtype).astype(np.float64)
  both_nan = np.isnan(g) & np.isnan(w)
  dist = np.abs(ordered(gb, width) - ordered(wb, width))
  return np.isinf(ulps) | both_nan | np.where(ulps == 0, gb == wb, ~np.isnan(g) & ~np.isnan(w) & (dist <= ulps))
'''


def device_head(device: str) -> list[str]:
  """A repro's first lines: DEV set (unless the user sets it), and on CL this host's OpenCL,
  PoCL through pyopencl's own libOpenCL (interop/tinygrad_device.open_cl)."""
  head = ["import math, os, sys", f"os.environ.setdefault('DEV', {device!r})"]
  if device.split(":")[0] == "CL":
    head += ["import glob, pyopencl   # loads the ICD before tinygrad opens CL",
             "os.environ.setdefault('OPENCL_PATH', (sorted(glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), '.libs', 'libOpenCL*'))) or [''])[0])"]
  return head


def repro_source(graph, inputs: dict, output: str, device: str, check: Check | None, title: str, expect: str = "",
                 kernel_uops=None) -> str:
  """The text of repro.py for the graph's output `output` (out0 at tensor level; a PARAM's
  input name at kernel level) on `device`. With a check, the script judges the value;
  without (a crash or an exception), computing it is the repro. A kernel-level graph
  needs the backend's kernel builder (kernel_uops)."""
  res = validate(graph)
  if not res.ok: raise NoRepro(f"invalid graph: {res.diagnostics[0].format()}")
  dts = {v.dtype for v in res.views if isinstance(getattr(v, "dtype", None), str)}
  head = [f'"""{_doc(title)}', "", f"tinygrad 0.14, device {device} (DEV); numpy. Written and checked by tinyspec (`tinyspec fuzz --backend tinygrad`):",
          "it exits non-zero while the bug is there" + (f" ({expect})" if expect else "") + '."""',
          *device_head(device)]
  if "bfloat16" in dts:   # the backend runs bfloat16 through tinygrad's own emulation (map table backend.emulate)
    head.append("os.environ.setdefault('EMULATED_DTYPES', 'bfloat16')   # clang before 17 has no __bf16: tinygrad emulates it")
  head += ["import numpy as np", "from tinygrad import Tensor, dtypes", "from tinygrad.uop.ops import UOp, Ops, AxisType, KernelInfo",
           "DEV = os.environ['DEV']", ""]
  if res.level == "tensor":
    k = int(output[3:]) if output.startswith("out") else 0
    node = graph.root_indices[k]
    lines, x = _tensor_lines(graph, res.views, inputs, node)
    dt = res.views[node].dtype
    lines += [f"t = {x} if {x}.device is not None else {x}.contiguous().clone(DEV)   # a value of constants only: on DEV"]
  else:
    if kernel_uops is None: raise NoRepro("a kernel-level repro needs the backend's kernel builder")
    lines, slots = _kernel_lines(graph, res, inputs, kernel_uops)
    slot = next(k for k, (name, _, _) in enumerate(slots) if name == output)
    dt = slots[slot][1]
    lines += [f"t = outs[{slot}]"]
  lines.append("got = t.bitcast(dtypes.uint16).numpy()" if dt == "bfloat16" else "got = t.numpy()")
  if check is None:
    return "\n".join(head + lines + ["print('actual:  ', got.tolist())", "print('tinygrad computed a value: the failure is gone')", ""])
  want = np.asarray(check.want)
  ulps = np.broadcast_to(np.asarray(check.ulps, np.float64), want.shape)
  tail = [_CHECK, f"want = {_literal(want, dt)}"]
  tail.append(f"ulps = np.array({[_float(float(u)) for u in ulps.reshape(-1)]}).reshape({tuple(want.shape)})".replace("'", ""))
  tail.append(f"alternatives = [{', '.join(_literal(np.asarray(a).astype(want.dtype), dt) for a in check.alternatives)}]")
  tail += [f"dtype = {dt!r}", "got = got.reshape(want.shape)",
           "ok = acceptable(got, want, ulps, dtype)",
           "for alt in alternatives: ok |= acceptable(got, alt, ulps, dtype)",
           "show = lambda a: as_float(a, dtype).tolist() if dtype == 'bfloat16' else a.tolist()",
           "print('expected:', show(want), *(['or', show(a)] for a in alternatives), 'within', ulps.tolist(), 'ulp')",
           "print('actual:  ', show(got))",
           f"assert ok.all(), f'{MARK} {{int((~ok).sum())}} of {{ok.size}} values are outside what the spec allows'",
           "print('ok: tinygrad gives a value the spec allows')", ""]
  return "\n".join(head + lines + tail)


def _doc(title: str) -> str:
  return title.replace('"""', "'''").replace("\\", "\\\\")


def reproduces(path: Path, device: str, expect: str, timeout: float = 300) -> tuple[bool, str]:
  """Run repro.py with plain python on `device` (DEV; no tinyspec on the path): (whether it
  fails the way the finding did, its output). expect: "value" (its check fails),
  "signal:NAME" (it dies by the signal) or "error:TYPE" (tinygrad raises TYPE)."""
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TINYSPEC_TINYGRAD_DEVICE")}
  env["DEV"] = device
  try:
    p = subprocess.run([sys.executable, "-I", str(path)], capture_output=True, text=True, env=env, timeout=timeout, cwd=str(path.parent))
  except subprocess.TimeoutExpired:
    return False, f"timed out after {timeout:g} s"
  out = (p.stdout + p.stderr)[-4000:]
  kind, _, what = expect.partition(":")
  if kind == "value": return p.returncode != 0 and MARK in p.stderr, out
  if kind == "signal": return p.returncode == -getattr(signal, what, 0), out
  if kind == "error": return p.returncode != 0 and re.search(rf"^(\w+\.)*{re.escape(what)}\b", p.stderr, re.M) is not None, out   # the traceback's last line (a runtime may print after it)
  return p.returncode != 0, out
