"""Checking compiled results against the reference evaluator, stage by stage.

  compare(got, want, dtype, ulp)  -> None or a message: integers and bools bit-exact;
                                     floats within `ulp` units in the last place of the
                                     dtype (ulp 0: bit-exact), NaN where the reference
                                     has NaN (any payload); a float that differs shown
                                     with its bits and the ulps between the two:
                                     got 0.99951171875 (0x3bff), want 1.0 (0x3c00), 1 ulp apart
  tolerance(op)                   -> the ulp bound ops.yaml `tolerances` gives op
  check_stages(graph, inputs)     -> every stage's graph validates and evaluates
                                     (refimpl) to the input graph's outputs, and every
                                     kernel's LINEAR evaluates like its kernel SINK. The
                                     first difference names its stage.
"""
from __future__ import annotations
import numpy as np
from tinyspec.dtypes import dtype as _dt
from tinyspec.validate import validate
from tinyspec.dispatch import input_name
from tinyspec.tolerance import tolerance as _tol, show_value, apart
from tinyspec.refimpl.numeric import NP
from tinyspec.refimpl import evaluate
from tinyspec.compiler.pipeline import lower
from tinyspec.refimpl import EvalError
import warnings
from tinyspec.props import props
from tinyspec.intervals import np_dtype
from tinyspec.graph import Graph


def tolerance(op: str, dt: str = "float32", decomposed: bool = False) -> float:
  """The ulp bound ops.yaml `tolerances` gives op's results of dtype dt."""
  return _tol(op, dt, decomposed)[0] if _dt(dt).cls == "float" else 0


def _ordered(bits: np.ndarray, nbits: int) -> np.ndarray:
  """Float bit patterns mapped to integers in the order of the values (-0 and +0 equal)."""
  b = bits.astype(np.int64)
  sign = np.int64(1) << (nbits - 1)
  mag = b & (sign - 1)
  neg = (b & sign) != 0
  return np.where(neg, -mag, mag)


def compare(got, want, dt: str, ulp: int = 0) -> str | None:
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape: return f"shape {got.shape} != {want.shape}"
  d = _dt(dt)
  if d.cls != "float":
    bad = got.astype(want.dtype) != want
    if not np.any(bad): return None
    i = tuple(int(k) for k in np.argwhere(np.atleast_1d(bad))[0]) if bad.ndim else ()
    return f"{np.sum(bad)} of {bad.size} differ, e.g. at {i}: got {show_value(got[i])}, want {show_value(want[i])}"
  nbits = d.bits
  ubits = np.dtype(f"uint{nbits}")
  g = np.ascontiguousarray(got).view(ubits).reshape(got.shape)     # (ascontiguousarray makes a 0-d array 1-d)
  w = np.ascontiguousarray(want).view(ubits).reshape(want.shape)
  gf, wf = got.astype(np.float64), want.astype(np.float64)
  gn, wn = np.isnan(gf), np.isnan(wf)
  if ulp == 0:
    bad = (g != w) & ~(gn & wn)
  else:
    dist = np.abs(_ordered(g, nbits) - _ordered(w, nbits))
    bad = (gn != wn) | (~gn & ~wn & (dist > ulp))
  if not np.any(bad): return None
  i = tuple(int(k) for k in np.argwhere(np.atleast_1d(bad))[0]) if bad.ndim else ()
  shown = f"got {show_value(got[i], True)}, want {show_value(want[i], True)}{apart(got[i], want[i])}"   # as the conformance runner shows it
  return f"{np.sum(bad)} of {bad.size} differ (tolerance {ulp} ulp), e.g. at {i}: {shown}"


def compare_outputs(got: dict, want: dict, tol: dict | None = None, default_ulp: int = 0) -> list[str]:
  """Messages for every output of `want` that `got` lacks or gets wrong."""
  names = {v: k for k, v in NP.items()}
  out = []
  for k, w in want.items():
    if k not in got: out.append(f"{k}: missing"); continue
    w = np.asarray(w)
    dt = names.get(w.dtype, "float64" if w.dtype.kind == "f" else "int64")
    msg = compare(got[k], w, dt, (tol or {}).get(k, default_ulp))
    if msg: out.append(f"{k}: {msg}")
  return out


class StageMismatch(AssertionError):
  pass


def check_stages(graph, inputs=None, target: str = "c", opts=None, tol: dict | None = None, compiled=None):
  """Compile (unless given) and check every stage against the input graph's outputs.
  Raises StageMismatch naming the first stage that differs; returns the Compiled."""
  c = compiled or lower(graph, target, opts)
  want = evaluate(c.stages["input"], inputs)
  for name, g in c.stages.items():
    if name == "input": continue
    res = validate(g)
    if not res.ok:
      raise StageMismatch(f"stage {name}: invalid graph: " + "; ".join(d.format() for d in res.diagnostics[:3]))
    programs = name in ("linearize", "render")
    try:
      got = evaluate(g, inputs)
    except Exception as e:
      # A crash inside refimpl, or (for the program-level stages) a refusal of a LINEAR it
      # cannot run yet, is refimpl's limit, not a miscompile: loud, not fatal. Any other
      # refusal of a stage's graph is a compiler bug and fails.
      if isinstance(e, EvalError) and not (programs and e.rule in ("eval.unsupported", "eval.oob")): raise
      warnings.warn(f"refimpl could not evaluate stage {name} ({type(e).__name__}: {str(e)[:160]}); stage validated, not value-checked", stacklevel=2)
      continue
    bad = compare_outputs(got, want, tol)
    if bad: raise StageMismatch(f"stage {name}: " + "; ".join(bad))
  check_kernels(c)
  return c


def check_kernels(c, seed: int = 0):
  """Each kernel's LINEAR (program level) against its isel-stage SINK (kernel level), on
  random contents for its PARAMs."""
  rng = np.random.default_rng(seed)
  for k, (kern, lin) in enumerate(zip(c.schedule.kernels, c.linear)):
    if kern.sink.op != "SINK": continue
    lg = Graph.from_uops(lin, level="program")
    inputs = {}
    for u in lin.src:
      if u.op != "PARAM": continue
      pr = props(u)
      if len(u.src) == 3:
        inputs[input_name(u.op, u.arg)] = np.asarray(pr.min_max[1], dtype=np_dtype(pr.dtype)); continue
      shape, dt = pr.shape, np_dtype(pr.dtype)
      if dt.kind == "f" or dt.name == "bfloat16": x = rng.standard_normal(shape).astype(dt)
      elif dt.kind == "b": x = rng.integers(0, 2, shape).astype(bool)
      else: x = rng.integers(0, 2, shape).astype(dt)   # small: most data-dependent indices stay in range
      inputs[input_name(u.op, u.arg)] = x
    try:
      want = evaluate(kern.sink, inputs)
      got = evaluate(lg, inputs)
    except Exception as e:
      # refimpl (as of 0f38c2b) cannot run every LINEAR: it does not see the gate of a
      # LOAD's INDEX there, and counts the LINEAR node itself as using a loop's RANGE after
      # its END. The same kernel as a SINK evaluated above, so this is refimpl's limit, not
      # a miscompile: say so loudly and go on (the compiled code is checked end to end).
      warnings.warn(f"refimpl cannot evaluate kernel {kern.name} (SINK or LINEAR): {type(e).__name__}: {str(e)[:200]}", stacklevel=2)
      continue
    bad = compare_outputs(got, want)
    if bad: raise StageMismatch(f"stage linearize kernel {k} ({kern.name}): " + "; ".join(bad))
