"""tinygrad's Tensor-API compositions (relu6, logcumsumexp, softplus, cumprod, pow, ...) on
special values, judged against their documented meaning: the campaign's third kind of turn
(interop/campaign.py), after graph fuzzing and drawn programs.

Each composition of interop/compositions.yaml is a Tensor method with the meaning its
documentation names, written as an expression evaluated exactly enough (Python floats in
float64 with IEEE special values, Python integers wrapped to the result's dtype) and rounded
once to the result's dtype. Not tinygrad's implementation, not tinyspec's lowering.

    cases = draw_cases(rng, 6)                        # compositions, dtypes, inputs dense in special values
    findings = check_cases(cases, "CPU", out)         # run in a child process on the device, judged
    for f in findings: f.triage                       # hunt.Verdict: a ledger entry (bug, divergence,
                                                      # undefined input) or new, with a checked repro

A finding is one element (or row) whose value tinygrad gives outside the tolerance of the
table (tinygrad's own test_ops tolerances), a NaN where the meaning is a number (or the
reverse), a wrong infinity; or a run that raises or dies. Its repro is a tinygrad-only
script on that element alone, kept only once it fails under plain python.
"""
from __future__ import annotations
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
import signal
import hashlib
import mpmath
import numpy as np
import yaml
from tinyspec.interop.hunt import value_classes, run_kind, Verdict, documented
from tinyspec.dtypes import DTYPES
from tinyspec.interop.repro import MARK, device_head, _literal, reproduces
from tinyspec.files import make_dir, write_file

TABLE_PATH = Path(__file__).with_name("compositions.yaml")
CASES_PER_TURN = 8
CHILD_TIMEOUT = 300     # seconds one child (a batch of cases on one device) may take


@lru_cache(maxsize=None)
def table() -> dict:
  """interop/compositions.yaml: tolerance, special values, compositions."""
  return yaml.safe_load(TABLE_PATH.read_text())


# ------------------------------------------------------------------ the documented meaning
# Python floats carry IEEE's special values and signed zeros; exp and log go through mpmath
# (no overflow: log(sum(exp(x))) of a float32 3e38 is 3e38, not inf), at WORK_PREC bits.
WORK_PREC = 256


def _real(f):
  """f on Python floats with IEEE's special values: a domain error is NaN, an overflow the
  infinity of the result's sign (the callers below say which where it is not +inf)."""
  def g(*a):
    if any(isinstance(v, float) and math.isnan(v) for v in a): return math.nan
    try: return f(*a)
    except (ValueError, ZeroDivisionError): return math.nan
    except OverflowError: return math.inf
  return g


def _fmax(a, b): return math.nan if _isnan(a) or _isnan(b) else max(a, b)
def _fmin(a, b): return math.nan if _isnan(a) or _isnan(b) else min(a, b)
def _isnan(v) -> bool: return (isinstance(v, float) and math.isnan(v)) or (isinstance(v, mpmath.mpf) and mpmath.isnan(v))


def _div(a, b):
  """IEEE division: a zero divisor gives the signed infinity or NaN."""
  if _isnan(a) or _isnan(b): return math.nan
  if b == 0:
    if a == 0: return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)
  if _isinf(a) and _isinf(b): return math.nan
  return a / b


def _isinf(v) -> bool: return bool(mpmath.isinf(v)) if isinstance(v, mpmath.mpf) else isinstance(v, float) and math.isinf(v)


def _log(x):
  if _isnan(x) or x < 0: return math.nan
  if x == 0: return -math.inf
  if x == math.inf: return math.inf
  with mpmath.workprec(WORK_PREC): return mpmath.log(mpmath.mpf(x))


def _exp(x):
  if _isnan(x): return math.nan
  with mpmath.workprec(WORK_PREC): return mpmath.exp(mpmath.mpf(x))


def _fsum(values):
  """The exact sum (IEEE: inf + -inf and NaN are NaN)."""
  vs = list(values)
  if any(_isnan(v) for v in vs) or (math.inf in vs and -math.inf in vs): return math.nan
  if math.inf in vs or -math.inf in vs: return next(v for v in vs if v in (math.inf, -math.inf))
  if all(isinstance(v, int) for v in vs): return sum(vs)
  if all(isinstance(v, float) for v in vs):
    total = sum(Fraction(v) for v in vs)
    try: return float(total)
    except OverflowError: return math.copysign(math.inf, total)
  with mpmath.workprec(WORK_PREC * 8): return mpmath.fsum(mpmath.mpf(v) for v in vs)


def _fprod(values):
  out = 1 if all(isinstance(v, int) for v in values) else 1.0
  for v in values: out = out * v
  return out


def _scan(op, values):
  out, acc = [], None
  for v in values:
    acc = v if acc is None else op(acc, v)
    out.append(acc)
  return out


def _rint(x):
  if not isinstance(x, float) or not math.isfinite(x): return x
  return math.copysign(float(round(x)), x)


def _round_to(f):
  def g(x):
    if not isinstance(x, float) or not math.isfinite(x): return x
    return math.copysign(float(f(x)), x) if f(x) == 0 else float(f(x))
  return g


def _sign(x):
  if _isnan(x): return math.nan
  one = 1 if isinstance(x, int) else 1.0
  return one if x > 0 else -one if x < 0 else x * 0


def _copysign(x, y):
  """The magnitude of x, the sign of y; None (any value) where y is a NaN, whose sign bit no
  operation defines."""
  return None if _isnan(y) else math.copysign(x, y)


def _pymod(x, y):
  if isinstance(x, int): return x - y * (x // y)
  if _isnan(x) or _isnan(y) or math.isinf(x) or y == 0: return math.nan
  return x % y


def _pow(x, y):
  """Python's ** on ints; C99 Annex F's pow on floats (Python's math.pow, with its poles)."""
  if isinstance(x, int) and isinstance(y, int): return x ** y
  if x == 0 and y < 0:   # a pole: +-inf, negative for -0.0 to an odd integer power
    odd = float(y).is_integer() and int(y) % 2 == 1
    return -math.inf if odd and math.copysign(1.0, x) < 0 else math.inf
  try: return math.pow(x, y)
  except ValueError: return math.nan
  except OverflowError: return -math.inf if x < 0 and float(y).is_integer() and int(y) % 2 else math.inf


def _argmax(values):
  if any(_isnan(v) for v in values): return next(i for i, v in enumerate(values) if _isnan(v))
  return max(range(len(values)), key=lambda i: (values[i], -i))


def _argmin(values):
  if any(_isnan(v) for v in values): return next(i for i, v in enumerate(values) if _isnan(v))
  return min(range(len(values)), key=lambda i: (values[i], i))


def _sorted(values):
  """Ascending, NaNs last (torch and numpy)."""
  return sorted(v for v in values if not _isnan(v)) + [v for v in values if _isnan(v)]


MEANING = {   # the names a meaning of compositions.yaml may use
  "fmax": _fmax, "fmin": _fmin, "fmaxs": lambda vs: _scan(_fmax, vs)[-1], "exp": _exp, "log": _log,
  "log10": lambda x: _log(x) / math.log(10) if not _isnan(_log(x)) else math.nan,
  "sqrt": _real(lambda x: math.sqrt(x) if x != math.inf else x), "tanh": _real(math.tanh),
  "sinh": _real(lambda x: x if math.isinf(x) else math.copysign(math.inf, x) if abs(x) > 710 else math.sinh(x)),
  "cosh": _real(lambda x: math.inf if abs(x) > 710 else math.cosh(x)), "asinh": _real(math.asinh),
  "acosh": _real(math.acosh), "atanh": _real(lambda x: math.copysign(math.inf, x) if abs(x) == 1 else math.atanh(x)),
  "sin": _real(math.sin), "cos": _real(math.cos), "tan": _real(math.tan), "asin": _real(math.asin), "acos": _real(math.acos),
  "atan": _real(math.atan), "erf": _real(math.erf), "abs": abs, "sign": _sign, "rint": _rint,
  "floor": _round_to(math.floor), "ceil": _round_to(math.ceil), "div": _div, "copysign": _copysign,
  "fmod": _real(math.fmod), "pymod": _pymod, "pyfloordiv": lambda x, y: x // y, "pypow": _pow,
  "fsum": _fsum, "fprod": _fprod, "cumsum": lambda vs: _scan(lambda a, b: _fsum([a, b]), vs),
  "cumprod": lambda vs: _scan(lambda a, b: a * b, vs), "cummax": lambda vs: _scan(_fmax, vs), "argmax": _argmax,
  "fmins": lambda vs: _scan(_fmin, vs)[-1], "cummin": lambda vs: _scan(_fmin, vs), "argmin": _argmin, "sorted": _sorted,
  "trunc": _round_to(math.trunc), "inf": math.inf,
  "pi": math.pi, "len": len, "min": min, "max": max,
}


def meaning(comp: dict, x, y=None):
  """The composition's documented meaning at x (and y): a number, or a list for a scan.
  Float inputs come in as Python floats, integer inputs as Python ints."""
  env = {"__builtins__": {}, **MEANING, "x": x, "y": y}   # globals: a comprehension in the meaning sees them
  try: return eval(comp["meaning"], env)   # noqa: S307 (the project's own table)
  except OverflowError: return math.inf
  except (ZeroDivisionError, ValueError): return math.nan


# ------------------------------------------------------------------ cases
@dataclass
class Case:
  """One composition on one input (x: a vector, or rows for row and scan forms; y for binary)."""
  name: str
  dtype: str
  x: np.ndarray
  y: np.ndarray | None = None

  @property
  def comp(self) -> dict: return table()["compositions"][self.name]

  @property
  def form(self) -> str: return self.comp.get("form", "elementwise")

  def element(self, i: int) -> "Case":
    """The case on the i-th element (a row, for row and scan forms) alone."""
    return Case(self.name, self.dtype, self.x[i:i + 1], None if self.y is None else self.y[i:i + 1])


def a_is_rows(case: Case) -> bool:
  return case.form in ("row", "scan")


def _values(rng, dtype: str, n: int) -> np.ndarray:
  """n values of dtype, about half of them special (compositions.yaml `special`)."""
  special = table()["special"][dtype]
  if np.dtype(dtype).kind == "f":
    out = rng.standard_normal(n) * rng.choice([1.0, 4.0, 100.0])
    pick = rng.random(n) < 0.6
    out[pick] = rng.choice(np.array(special, np.float64), int(pick.sum()))
    with np.errstate(over="ignore"): return out.astype(dtype)
  info = np.iinfo(dtype)
  out = rng.integers(max(info.min, -1000), min(info.max, 1000), n, endpoint=True).astype(np.int64)
  pick = rng.random(n) < 0.6
  out[pick] = rng.choice(np.array(special, np.int64), int(pick.sum()))
  return out.astype(dtype)


def _bounded(x: np.ndarray, bound) -> np.ndarray:
  """x with its finite values beyond `bound` (a composition whose meaning overflows its own
  intermediate values near the dtype's range, for any float implementation) set to 1."""
  if bound is None or x.dtype.kind != "f": return x
  x = x.copy()
  with np.errstate(invalid="ignore"): x[np.isfinite(x) & (np.abs(x) > bound)] = 1
  return x


def draw_cases(rng, k: int) -> list[Case]:
  """k cases: a composition (each equally likely), one of its dtypes (the first most often),
  inputs dense in special values; a full sweep of the special values for elementwise forms."""
  comps = table()["compositions"]
  names = sorted(comps)
  out = []
  for _ in range(k):
    name = names[int(rng.integers(len(names)))]
    c = comps[name]
    dts = c["dtypes"]
    dt = dts[0] if rng.random() < 0.5 else dts[int(rng.integers(len(dts)))]
    form = c.get("form", "elementwise")
    if form == "elementwise":
      x = np.concatenate([np.array(table()["special"][dt], dt), _values(rng, dt, 9)])
      out.append(Case(name, dt, x))
    elif form == "binary":
      x = _values(rng, dt, 48)
      if "args" in c and np.dtype(dt).kind != "f":   # an int operand in range, never a zero divisor
        lo, hi = c["args"]
        y = rng.integers(lo, hi, 48, endpoint=True)
        if lo < 0 < hi: y[y == 0] = 1
        y = y.astype(dt)
      else: y = _values(rng, dt, 48)
      out.append(Case(name, dt, x, y))
    else:
      n = int(rng.choice([3, 5, 8]))
      out.append(Case(name, dt, _bounded(_values(rng, dt, 4 * n).reshape(4, n), c.get("bound"))))
  return out


# ------------------------------------------------------------------ running on tinygrad
CHILD = r'''
import json, os, sys
if os.environ["DEV"].split(":")[0] == "CL":   # PoCL through pyopencl's libOpenCL (interop/tinygrad_device.open_cl)
  import glob, pyopencl
  os.environ.setdefault("OPENCL_PATH", (sorted(glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs", "libOpenCL*"))) or [""])[0])
import numpy as np
from tinygrad import Tensor, dtypes
DEV = os.environ["DEV"]
def arr(h, dt, shape): return np.frombuffer(bytes.fromhex(h), dt).reshape(shape).copy()   # writable: CL's copyin needs it (ledger cl-readonly-numpy)
for line in sys.stdin:
  c = json.loads(line)
  print(json.dumps({"begin": c["i"]}), flush=True)
  try:
    x = Tensor(arr(c["x"], c["dtype"], c["shape"]), device=DEV)
    y = Tensor(arr(c["y"], c["dtype"], c["shape"]), device=DEV) if c["y"] is not None else None
    got = np.ascontiguousarray(eval(c["call"]).numpy())
    print(json.dumps({"i": c["i"], "dtype": got.dtype.str, "shape": got.shape, "data": got.tobytes().hex()}), flush=True)
  except Exception as e:
    print(json.dumps({"i": c["i"], "error": f"{type(e).__name__}: {str(e)[-600:]}"}), flush=True)
'''


def _child_env(device: str) -> dict:
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TINYSPEC_TINYGRAD_DEVICE")}
  env["DEV"] = device
  return env


def run_cases(cases: list[Case], device: str, timeout: float = CHILD_TIMEOUT) -> dict:
  """case index -> np.ndarray (tinygrad's value) or str (what it raised, or the signal it
  died by). A child that dies is restarted for the cases after the one it died in."""
  results: dict = {}
  todo = list(range(len(cases)))
  while todo:
    lines = "".join(json.dumps({"i": i, "call": cases[i].comp["call"], "dtype": cases[i].dtype, "shape": list(cases[i].x.shape),
                                "x": np.ascontiguousarray(cases[i].x).tobytes().hex(),
                                "y": None if cases[i].y is None else np.ascontiguousarray(cases[i].y).tobytes().hex()}) + "\n" for i in todo)
    try:
      p = subprocess.run([sys.executable, "-I", "-c", CHILD], input=lines, capture_output=True, text=True, env=_child_env(device), timeout=timeout)
      out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
      out, rc = (e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""), "timeout"
    begun = None
    for line in out.splitlines():
      try: msg = json.loads(line)
      except ValueError: continue
      if "begin" in msg: begun = msg["begin"]; continue
      results[msg["i"]] = msg["error"] if "error" in msg else \
        np.frombuffer(bytes.fromhex(msg["data"]), np.dtype(msg["dtype"])).reshape(msg["shape"])
    if begun is not None and begun not in results:   # died inside this case
      results[begun] = "hang: timed out" if rc == "timeout" else _death(rc)
    todo = [i for i in todo if i not in results and (begun is None or i > begun)]
    if begun is None: break   # the child did not start (no tinygrad): nothing more to learn
  return results


def _death(rc) -> str:
  if isinstance(rc, int) and rc < 0:
    try: return f"killed by {signal.Signals(-rc).name}"
    except ValueError: return f"killed by signal {-rc}"
  return f"exited {rc}"


# ------------------------------------------------------------------ judging
def _py(v, dtype: str):
  return float(v) if np.dtype(dtype).kind == "f" else int(v)


def expected(case: Case, out_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
  """The meaning at every element (row), rounded once to out_dtype (integers wrapped), and
  where the meaning leaves the value free (any result is right there)."""
  rows = case.x if a_is_rows(case) else case.x.reshape(-1, 1)
  ys = None if case.y is None else case.y.reshape(-1)
  vals = []
  for k, row in enumerate(rows):
    xs = [_py(v, case.dtype) for v in row]
    arg = xs if a_is_rows(case) else xs[0]
    vals.append(meaning(case.comp, arg, None if ys is None else _py(ys[k], case.dtype)))
  return _to_dtype(vals, out_dtype)


def _to_dtype(vals, dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
  flat = [v for row in vals for v in (row if isinstance(row, list) else [row])]
  free = np.array([v is None for v in flat], bool)
  flat = [0 if v is None else v for v in flat]
  if dt.kind == "f":
    with np.errstate(over="ignore"): return np.array([float(v) for v in flat], np.float64).astype(dt), free
  bits = dt.itemsize * 8
  def wrap(v):
    if isinstance(v, float): return v   # NaN or inf where an integer was expected: judged as it is
    v = int(v) % (1 << bits)
    return v - (1 << bits) if dt.kind == "i" and v >= 1 << (bits - 1) else v
  w = [wrap(v) for v in flat]
  return (np.array(w, dt) if all(isinstance(v, int) for v in w) else np.array(w, object)), free


def difference(got: np.ndarray, want: np.ndarray, dtype: str, scale: np.ndarray | None = None, free=None) -> tuple[str, int] | None:
  """(kind of the first difference, its flat index), or None where got is acceptable: an
  integer exactly, a float within atol + rtol |want| (plus the rounding a sum of terms of
  magnitude `scale` may carry), NaN for NaN, the same infinity; anything where `free`."""
  g, w = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
  if g.shape != w.shape: return ("value", 0)
  free = np.zeros(len(g), bool) if free is None else np.asarray(free).reshape(-1)
  if g.dtype.kind != "f":
    for i, (a, b) in enumerate(zip(g.tolist(), w.tolist())):
      if a != b and not free[i]: return ("value", i)
    return None
  tol = table()["tolerance"].get(dtype, table()["tolerance"]["float32"])
  wf, gf = w.astype(np.float64), g.astype(np.float64)
  sc = np.zeros_like(wf) if scale is None else np.asarray(scale, np.float64).reshape(-1)
  eps = float(np.finfo(g.dtype).eps)
  for i in range(len(gf)):
    a, b = gf[i], wf[i]
    if free[i]: continue
    if math.isnan(b) and math.isnan(a): continue
    if math.isnan(b): return ("not-nan", i)
    if math.isnan(a): return ("nan", i)
    if math.isinf(b) or math.isinf(a):
      if a == b: continue
      return ("sign" if a == -b else "overflow" if math.isinf(a) else "ulp", i)
    if abs(a - b) > tol["atol"] + tol["rtol"] * abs(b) + 4 * eps * sc[i]:
      return ("flush" if a == 0 and b != 0 and abs(b) < np.finfo(g.dtype).tiny else "ulp", i)
  return None


def _scale(case: Case, n_out: int) -> np.ndarray | None:
  """For sums along a row: the magnitude of the terms (a reduction may round at that scale)."""
  if not a_is_rows(case) or case.x.dtype.kind != "f": return None
  with np.errstate(all="ignore"):
    mags = np.abs(np.where(np.isfinite(case.x), case.x, 0).astype(np.float64))
    row = mags.sum(-1) * case.x.shape[-1]
    return np.repeat(row, n_out // len(row)) if n_out % len(row) == 0 else None


# ------------------------------------------------------------------ findings
@dataclass
class Finding:
  """A composition whose tinygrad value is not its meaning (or whose run failed) on a device."""
  case: Case
  device: str
  kind: str                 # hunt's kinds: nan, not-nan, overflow, sign, ulp, flush, value; error:TYPE, signal:NAME, hang
  index: int | None = None  # the failing element (row)
  got: object = None
  want: object = None
  message: str = ""
  out_dtype: str | None = None   # the dtype of tinygrad's result
  triage: object = None     # hunt.Verdict

  def __str__(self) -> str:
    c = self.case
    where = f" at {_show_inputs(c, self.index)}" if self.index is not None else ""
    what = f"gives {self.got}, its meaning {self.want}" if self.message == "" else self.message[:300]
    return f"composition {c.name} ({c.comp['call']}) {c.dtype} on {self.device}{where}: {what}"


def _show_inputs(case: Case, i: int) -> str:
  rows = case.x if a_is_rows(case) else case.x.reshape(-1)
  s = f"x={np.asarray(rows[i]).tolist()}"
  return s + (f", y={case.y.reshape(-1)[i].item()}" if case.y is not None else "")


def input_classes(case: Case, i: int | None) -> set:
  """The value classes (hunt.value_classes) of the failing element's inputs, or of all inputs."""
  out = set()
  for a in (case.x, case.y):
    if a is None: continue
    part = a if i is None else a[i] if (a_is_rows(case) and a is case.x) else a.reshape(-1)[i]
    out |= value_classes(part, a.dtype)
  return out


def judge(case: Case, result) -> Finding | None:
  """The finding of one run on one device, or None where tinygrad's value is its meaning."""
  if isinstance(result, str):
    kind = run_kind(result if result.startswith(("killed", "hang")) else f"failed: {result}")
    if result.startswith("killed"): kind = "signal:" + result.split()[-1]
    return Finding(case, "", kind, None, None, None, result)
  want, free = expected(case, result.dtype)
  d = difference(result, want, case.dtype, _scale(case, want.size), free)
  if d is None: return None
  kind, flat = d
  per = max(1, want.size // (case.x.shape[0] if a_is_rows(case) else case.x.size))
  return Finding(case, "", kind, flat // per, np.asarray(result).reshape(-1)[flat].item(), want.reshape(-1)[flat].item(),
                 out_dtype=result.dtype.name)


def check_cases(cases: list[Case], device: str, out: Path | None) -> list[Finding]:
  """Run the cases on device, judge them, and triage each finding (with a repro under out)."""
  results = run_cases(cases, device)
  findings = []
  for i, c in enumerate(cases):
    if i not in results: continue
    f = judge(c, results[i])
    if f is None: continue
    f.device = device
    f.triage = triage(f, out)
    findings.append(f)
  return findings


def facts_of(f: Finding) -> dict:
  """What a composition finding is matched by (hunt.matches): its kind, the Tensor method
  (api), dtypes, the device, the classes of its inputs, the message."""
  dts = {f.case.dtype, f.out_dtype or f.case.dtype} & set(DTYPES)
  return {"kind": f.kind, "api": {f.case.name}, "ops": set(), "dtypes": dts, "result": dts, "operand": {f.case.dtype},
          "sources": set(), "device": f.device, "message": f.message, "inputs": input_classes(f.case, f.index),
          "classes": {DTYPES[x].cls for x in dts}}


def triage(f: Finding, out: Path | None):
  """hunt's verdict on a composition finding: a ledger entry by its signature, or new (with a
  repro that failed on tinygrad under plain python, written under out/repros/)."""
  facts = facts_of(f)
  bug = documented(facts)
  v = Verdict("documented", bug, facts=facts) if bug is not None else Verdict("new", why=str(f), facts=facts)
  if out is None: v.note = "no --out: no repro written"; return v
  v.repro, v.note = keep_repro(f, Path(out))
  return v


# ------------------------------------------------------------------ repros
def repro_source(f: Finding, case: Case) -> str:
  """A tinygrad-only script computing case (the finding's element alone, or the whole case)
  and failing (an AssertionError naming the bug) while tinygrad's value is not the meaning;
  for a crash, computing it is the repro."""
  c = case.comp
  lines = [f'"""{str(f)}', "", f"tinygrad 0.14, device {f.device} (DEV); numpy. The meaning: {c['meaning']} ({c['doc']}).",
           'Written and checked by tinyspec (`tinyspec fuzz --backend tinygrad --campaign`): it exits non-zero while the bug is there."""',
           *device_head(f.device), "import numpy as np", "from tinygrad import Tensor, dtypes", "DEV = os.environ['DEV']",
           f"x = Tensor({_np_literal(case.x)}, device=DEV)"]
  if case.y is not None: lines.append(f"y = Tensor({_np_literal(case.y)}, device=DEV)")
  lines.append(f"got = {c['call']}.numpy()")
  if f.kind.startswith(("error", "signal", "hang")):
    return "\n".join(lines + ["print('actual:', got.tolist())", "print('tinygrad computed a value: the failure is gone')", ""])
  want, free = expected(case, np.dtype(f.out_dtype))
  tol = table()["tolerance"].get(case.dtype, table()["tolerance"]["float32"])
  lines += [f"want = {_np_literal(want)}",
            "def close(g, w):   # the same integer; NaN for NaN, the same infinity, else within atol + rtol |w|",
            "  g, w = np.asarray(g, np.float64).reshape(-1), np.asarray(w, np.float64).reshape(-1)",
            "  with np.errstate(invalid='ignore'):",
            f"    return (np.isnan(g) & np.isnan(w)) | (g == w) | (np.isfinite(g) & np.isfinite(w) & (np.abs(g - w) <= {tol['atol']!r} + {tol['rtol']!r} * np.abs(w)))",
            f"free = np.array({free.reshape(-1).tolist()})   # where the meaning leaves the value open",
            "print('expected:', want.tolist())", "print('actual:  ', got.tolist())",
            f"assert (close(got, want) | free).all(), '{MARK} {case.name} is not its documented meaning ({c['meaning']})'", ""]
  return "\n".join(lines)


def _np_literal(a: np.ndarray) -> str:
  return _literal(a, a.dtype.name)


def keep_repro(f: Finding, out: Path) -> tuple[Path | None, str]:
  """Write and run repro.py for f, smallest first (the failing element alone, then the whole
  case); (its path, "") when it fails on tinygrad as the finding did, else (None, why)."""
  h = hashlib.sha256(f"{f.case.name}{f.case.dtype}{f.case.x.tobytes()!r}{f.index}".encode()).hexdigest()[:8]
  folder = make_dir(out / "repros" / f"{f.case.name}-{f.case.dtype}-{f.kind.replace(':', '_')}-{f.device}-{h}")
  expect = f.kind if f.kind.startswith(("error", "signal")) else "value"
  why = []
  candidates = ([("the element alone", f.case.element(f.index))] if f.index is not None else []) + [("the whole case", f.case)]
  for title, case in candidates:
    path = folder / "repro.py"
    write_file(path, repro_source(f, case))
    ok, output = reproduces(path, f.device, expect)
    if ok: return path, ""
    why.append(f"{title}: does not fail on tinygrad ({output.strip().splitlines()[-1][:160] if output.strip() else 'no output'})")
  (folder / "repro.py").unlink(missing_ok=True)
  write_file(folder / "not-reproduced.txt", "\n".join([str(f), *why]) + "\n")
  return None, "; ".join(why)


# ------------------------------------------------------------------ the campaign's turn
def composition_turn(device: str, rng, out: Path, deadline: float) -> list[Finding]:
  """One campaign turn on device: CASES_PER_TURN drawn cases (seeded by the campaign's rng)."""
  if time.monotonic() >= deadline: return []
  nrng = np.random.default_rng(rng.randrange(2**31))
  return check_cases(draw_cases(nrng, CASES_PER_TURN), device, Path(out) / "compositions")
