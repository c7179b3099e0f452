"""The map table (interop/tinygrad_map.yaml): how tinygrad's UOps read as the spec's, loaded
once; tinygrad's dtypes by their tinyspec names, and the table's rule for weak dtypes (a
weak operand adopts the dtype of its slot group, `weak:` in the table), which reads the
slot groups and result dtypes of spec/ops.yaml."""
from __future__ import annotations
import re
from functools import lru_cache
from pathlib import Path
import yaml
from tinyspec.tables import tables

MAP_PATH = Path(__file__).with_name("tinygrad_map.yaml")


@lru_cache(maxsize=None)
def mapping() -> dict:
  """The map table (interop/tinygrad_map.yaml)."""
  return yaml.safe_load(MAP_PATH.read_text())


def dtype_name(dt) -> str | None:
  """A tinygrad DType's tinyspec name (a weak dtype: its default), None when unmapped."""
  m = mapping()
  return m["weak"].get(dt.name) or m["dtypes"].get(dt.name)


def is_weak(dt) -> bool: return dt.name in mapping()["weak"]


def source_language(device: str | None) -> str | None:
  """The language of a SOURCE that tinygrad's device renders (C on CPU, OpenCL on CL)."""
  return {"CPU": "c", "CL": "opencl", "PYTHON": "python"}.get((device or "").split(":")[0], (device or "").lower() or None)


def is_invalid(u) -> bool:
  """u is tinygrad's Invalid constant."""
  return u.op.name == "CONST" and type(u.arg).__name__ == "InvalidType"


@lru_cache(maxsize=None)
def _slot_group_cached(opname: str, slot: str) -> frozenset:
  od = tables().ops[opname]
  links = {s.name: s.dtype["same"] for s in od.slots if isinstance(s.dtype, dict) and "same" in s.dtype}
  root = links.get(slot, slot)
  return frozenset({root} | {n for n, r in links.items() if r == root})


def slot_group(od, slot: str) -> frozenset:
  """The slots that must share `slot`'s dtype (linked by `dtype: {same: X}`)."""
  return _slot_group_cached(od.name, slot)


@lru_cache(maxsize=None)
def _result_slot_cached(opname: str) -> str | None:
  od = tables().ops[opname]
  expr = (od.derive_src.get("dtype") or ("",))[0].strip()
  m = re.fullmatch(r"src\[(\d+)\]\.dtype", expr)
  if not m: return None
  k = int(m.group(1))
  return od.slot_for(k).name if k < len(od.slots) or od.slots and od.slots[-1].variadic else None


def result_slot(od) -> str | None:
  """The slot whose dtype the spec gives the result (`dtype: src[k].dtype`), or None."""
  return _result_slot_cached(od.name)
