"""tinygrad's names for the spec's dtypes and ops, as the `tinygrad` backend builds graphs
with them (the `backend` section of interop/tinygrad_map.yaml)."""
from __future__ import annotations


def _backend_table() -> dict:
  from tinyspec.interop.tinygrad_import import mapping
  return mapping()["backend"]


def tg_dtype(name: str, kernel: bool = False):
  """The tinygrad DType of a tinyspec dtype name."""
  from tinygrad import dtypes
  B = _backend_table()
  name = (B["kernel_dtypes"] if kernel else {}).get(name) or B["dtypes"].get(name, name)
  return getattr(dtypes, name)


def tg_op(op: str):
  """tinygrad's Ops member for a spec op: the inverse of a plain rename of the import map
  (RECIP -> RECIPROCAL ...), else the op of the same name; None when tinygrad has none."""
  from tinygrad.uop.ops import Ops
  name = _inverse_renames().get(op, op)
  return Ops[name] if name in Ops.__members__ else None


def _inverse_renames() -> dict:
  from tinyspec.interop.tinygrad_import import mapping
  m = mapping()
  return {e["op"]: name for name, e in m["ops"].items() if "op" in e and "form" not in e}
