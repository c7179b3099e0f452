"""What an import of tinygrad UOps did beyond one-to-one (interop/tinygrad_import.py): the
ops it renamed, the forms it used and what the spec lacks, with counts."""
from __future__ import annotations
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ImportReport:
  """What an import did beyond one-to-one: `renamed` ("RECIPROCAL -> RECIP"), `forms`
  (name -> count, see the table's `forms`) and `unmapped` (what the spec lacks: "op GETADDR",
  "dtype float8_e4m3", "AxisType DEVICE", "ParamArg.axis" ... -> count)."""
  renamed: Counter = field(default_factory=Counter)
  forms: Counter = field(default_factory=Counter)
  unmapped: Counter = field(default_factory=Counter)

  def merge(self, other: "ImportReport") -> "ImportReport":
    self.renamed.update(other.renamed); self.forms.update(other.forms); self.unmapped.update(other.unmapped)
    return self

  def to_json(self) -> dict:
    return {k: dict(sorted(getattr(self, k).items())) for k in ("renamed", "forms", "unmapped")}

  def lines(self) -> list[str]:
    out = []
    for title, c in (("unmapped (the spec has no counterpart)", self.unmapped), ("forms", self.forms), ("renamed", self.renamed)):
      if c: out.append(f"{title}: " + ", ".join(f"{k} x{n}" for k, n in sorted(c.items())))
    return out
