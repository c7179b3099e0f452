"""Which ops the compiler lowers, at which levels: computed from what the stages and the
render table handle, never listed by hand."""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.compiler.rendertables import render_tables, policy, is_alu
from tinyspec.compiler.passes.readers import READERS
from tinyspec.compiler.render import TARGETS, DTYPE_FIELD
from tinyspec.dtypes import DTYPES
from tinyspec.decompose import decomposed_ops


def supported_dtypes(target: str) -> frozenset[str]:
  """The dtypes the target has a type for (spec/dtypes.yaml `c` / `cl`; void included): a
  graph holding any other is refused (compile.unsupported)."""
  if target not in TARGETS: raise KeyError(f"unknown target {target!r}")
  return frozenset(n for n, d in DTYPES.items() if getattr(d, DTYPE_FIELD[target]) is not None)


def supported_ops(target: str) -> dict[str, set[str]]:
  """op -> the levels ({"tensor", "kernel", "program"}) compiled for target."""
  if target not in TARGETS: raise KeyError(f"unknown target {target!r}")
  T = tables()
  R = render_tables()
  rendered = {op for op, cases in R["ops"].items() if any(c.get("target", target) == target for c in cases)}
  structural = set(R.get("structural", {}))
  try:
    decomposable = decomposed_ops()
  except Exception:
    decomposable = frozenset()
  low = rendered | structural | {"REDUCE", "END", "AFTER"} | {op for op in decomposable if T.ops[op].category == "decomposed"}
  tensor = set(READERS.names()) | T.storage_ops | policy("constant_storage") | policy("transparent") | policy("realize") \
    | {op for op in T.ops if is_alu(op) and op in low} | {"PARAM", "CONST", "STORE", "SINK", "GROUP", "FUNCTION", "CALL", "TUPLE", "GETTUPLE"}
  out: dict[str, set[str]] = {}
  for name, od in T.ops.items():
    if od.untrusted: continue
    lv = set()
    if "tensor" in od.levels and name in tensor: lv.add("tensor")
    if "kernel" in od.levels and name in low: lv.add("kernel")
    if "program" in od.levels and name in low: lv.add("program")
    if lv: out[name] = lv
  return out
