"""tinygrad's names for the spec's dtypes, constants and ops, as the `tinygrad` backend builds
graphs with them (the `backend` section of interop/tinygrad_map.yaml)."""
from __future__ import annotations
from tinyspec.interop.tinygrad_map import mapping


class Unexpressed(NotImplementedError):
  """A valid graph the adapter does not build in tinygrad (refused as backend.unsupported;
  anything tinygrad itself raises stays an error: it may be tinygrad's bug)."""


def _backend_table() -> dict:
  return mapping()["backend"]


def tg_dtype(name: str, kernel: bool = False):
  """The tinygrad DType of a tinyspec dtype name."""
  from tinygrad import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  B = _backend_table()
  name = (B["kernel_dtypes"] if kernel else {}).get(name) or B["dtypes"].get(name, name)
  return getattr(dtypes, name)


def tg_const(v, dtype: str):
  """The Python value tinygrad takes for a CONST's `value` of `dtype` (float specials are
  the strings "nan", "inf", "-inf" in the file format)."""
  if isinstance(v, str): return float(v)
  if dtype == "bool": return bool(v)
  return v


def tg_op(op: str):
  """tinygrad's Ops member for a spec op: the inverse of a plain rename of the import map (or `rename: true`)
  (RECIP -> RECIPROCAL ...), else the op of the same name; None when tinygrad has none."""
  from tinygrad.uop.ops import Ops  # noqa: PLC0415 (tinygrad, an optional dependency)
  name = _inverse_renames().get(op, op)
  return Ops[name] if name in Ops.__members__ else None


def tg_method(op: str) -> str | None:
  """The Tensor (or UOp) method tinygrad defines the spec op `op` by, where the map table's
  `backend.methods` names one."""
  return _backend_table()["methods"].get(op)


def apply_alu(op: str, arg, srcs: list, kernel: bool = False):
  """Elementwise op `op` (arg: its arg) applied to tinygrad Tensors (kernel: UOps) srcs:
  CAST by its dtype, an op of `backend.methods` by that method, any other by tinygrad's op
  of the same meaning (`.alu`)."""
  if op == "CAST": return srcs[0].cast(tg_dtype(arg, kernel=kernel))
  if (method := tg_method(op)) is not None: return getattr(srcs[0], method)(*srcs[1:])
  tg = tg_op(op)
  if tg is None: raise Unexpressed(f"{op}: no tinygrad op")
  return srcs[0].alu(tg, *srcs[1:])


def _inverse_renames() -> dict:
  m = mapping()
  return {e["op"]: name for name, e in m["ops"].items() if "op" in e and ("form" not in e or e.get("rename"))}
