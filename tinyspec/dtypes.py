"""dtypes as data: read from spec/dtypes.yaml, never listed in code."""
from __future__ import annotations
import math
from dataclasses import dataclass
from functools import lru_cache
import yaml
from tinyspec import spec  # type: ignore[attr-defined]  # spec/ is installed as tinyspec.spec (setup.py maps the folder)


@dataclass(frozen=True)
class DType:
  name: str
  cls: str            # bool, int, uint, float, index, void
  itemsize: int
  min: float | int | None
  max: float | int | None
  np: str | None      # NumPy dtype name used by the reference evaluator
  c: str | None       # C type name (None: C has none, the compiler refuses the dtype)
  cl: str | None      # OpenCL C type name (likewise)
  mantissa: int | None = None
  exponent: int | None = None
  nan: int | None = None   # a float dtype's canonical NaN, as its bits (dtypes.yaml `nan`)
  bias: int | None = None          # exponent bias where not IEEE's (the fnuz float8s)
  finite_max: float | None = None  # largest finite value where not IEEE's (float8_e4m3 and the fnuz ones)
  has_inf: bool = True             # dtypes.yaml `inf: false`: no infinity
  negzero: bool = True             # dtypes.yaml `negzero: false`: no -0.0
  saturate: bool = False           # dtypes.yaml `overflow: saturate` (decision fp8-convert)

  @property
  def bits(self) -> int: return self.itemsize * 8
  @property
  def is_float(self) -> bool: return self.cls == "float"
  @property
  def is_int(self) -> bool: return self.cls in ("int", "uint", "index")
  @property
  def is_signed(self) -> bool: return self.cls in ("int", "index") or self.cls == "float"
  @property
  def normal_range(self) -> tuple[float, float]:
    """A float dtype's smallest and largest finite normal magnitudes, from its exponent
    and mantissa bits (IEEE layout; bfloat16 alike), or the row's `bias` and `finite_max`."""
    assert self.exponent is not None and self.mantissa is not None, f"{self.name} is not a float dtype"
    bias = self.exponent_bias
    return 2.0 ** (1 - bias), self.finite_max or (2.0 - 2.0 ** -self.mantissa) * 2.0 ** bias
  @property
  def exponent_bias(self) -> int:
    assert self.exponent is not None, f"{self.name} is not a float dtype"
    return self.bias if self.bias is not None else 2 ** (self.exponent - 1) - 1
  def __repr__(self) -> str: return f"dtypes.{self.name}"


def _num(v):
  if isinstance(v, str): return float(v)   # "inf" / "-inf"
  return v


@lru_cache(maxsize=None)
def _load(path: str):
  with open(path) as f: raw = yaml.safe_load(f)
  out = {}
  for name, d in raw["dtypes"].items():
    lo, hi = d.get("min"), d.get("max")
    if d["class"] == "float": lo, hi = -math.inf, math.inf
    out[name] = DType(name, d["class"], d["itemsize"], _num(lo), _num(hi), d.get("np"), d["c"], d["cl"], d.get("mantissa"), d.get("exponent"),
                      int(d["nan"], 16) if d.get("nan") is not None else None, d.get("bias"), d.get("finite_max"),
                      d.get("inf", True), d.get("negzero", True), d.get("overflow") == "saturate")
  return out, raw.get("aliases", {}), raw.get("groups", {}), raw.get("classes", {})


def _tables(path=None):
  return _load(str(path or spec.path("dtypes.yaml")))


DTYPES, ALIASES, GROUPS, CLASSES = _tables()


def dtype(name: str) -> DType:
  """The DType called `name` (aliases such as 'float' or tinygrad's 'weakint' accepted)."""
  return DTYPES[ALIASES.get(name, name)]


def canonical(name: str) -> str | None:
  """Canonical dtype name for a spelling, or None if unknown."""
  n = ALIASES.get(name, name)
  return n if n in DTYPES else None
