"""Benchmark of the correctly rounded functions (refimpl/crmath) against NumPy's libm.

Prints, in one run, ns/element of crmath.exp2/log2/sin/pow and of np.exp2/np.log2/
np.sin/np.power on the same 10^6 inputs, once float32 inputs rounded to float32
(crmath's tiers 1 and 2; NumPy's float64 function on the widened values, the bar being
~10x) and once float64 inputs rounded to float64 (tier 2; bar ~50x), with the ratio and
the share of elements decided by each stage (tier 1, tier 2, exact mpmath fallback).

Inputs: exp2 uniform over the arguments whose result is neither 0 nor inf; log2 and
sin uniform in bits over the positive (log2) or all (sin) finite values, so half of
sin's arguments are beyond 2^16 (Payne-Hanek reduction); pow a log-uniform in
[2^-8, 2^8] and b uniform in [-16, 16] (so that most results are finite).
Times are the median of --repeat runs.

--errors N instead measures each tier's approximation against mpmath on N random
arguments plus N/10 around the reduction boundaries, and prints the largest relative
error and the largest ratio of the error to the bound the tier claims (both as log2);
the module docstrings quote these figures.

Run: .venv/bin/python bench/bench_crmath.py [--n 1000000] [--repeat 5] [--errors N]
"""
from __future__ import annotations
import argparse
import importlib
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tinyspec.refimpl import crmath                          # noqa: E402
from mpmath import libmp as L

MODULES = {name: importlib.import_module(f"tinyspec.refimpl.crmath.{name}") for name in ("exp2", "log2", "sin", "pow")}
NUMPY = {"exp2": np.exp2, "log2": np.log2, "sin": np.sin, "pow": np.power}


def random_bits(rng, n, wide, positive=False):
  """Finite values uniform in bits: float64 patterns, or float32 ones widened."""
  if wide:
    x = rng.integers(0, 1 << 64, n, dtype=np.uint64).view(np.float64)
  else:
    with np.errstate(invalid="ignore"):                   # NaN patterns
      x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
  x = np.where(np.isfinite(x), x, 1.0)
  return np.abs(x) if positive else x


def inputs(name, rng, n, wide):
  fmt = "float64" if wide else "float32"
  f = crmath.FORMATS[fmt]
  if name == "exp2":
    return (crmath.round_to(rng.uniform(f.qmin, f.emax + 1, n), fmt),)
  if name == "log2":
    return (random_bits(rng, n, wide, positive=True),)
  if name == "sin":
    return (random_bits(rng, n, wide),)
  a = crmath.round_to(np.exp2(rng.uniform(-8, 8, n)), fmt)
  return a, crmath.round_to(rng.uniform(-16, 16, n), fmt)


def timed(fn, repeat):
  times = []
  for _ in range(repeat):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def bench(n, repeat):
  rng = np.random.default_rng(2024)
  print(f"n = {n}, median of {repeat} runs, ns/element")
  print(f"{'function':8} {'format':8} {'crmath':>9} {'numpy f64':>10} {'ratio':>7}   "
        f"{'tier1':>8} {'tier2':>8} {'exact':>6}")
  for wide in (False, True):
    fmt = "float64" if wide else "float32"
    for name in ("exp2", "log2", "sin", "pow"):
      args = inputs(name, rng, n, wide)
      ours = getattr(crmath, name)
      ours(*args, fmt=fmt)                     # warm: tables built, caches filled
      crmath.reset_stats()
      t_ours = timed(lambda: ours(*args, fmt=fmt), repeat)
      with np.errstate(all="ignore"):
        t_np = timed(lambda: NUMPY[name](*args), repeat)
      st = crmath.stats()
      shares = [st.get((name, s), 0) / (repeat * n) for s in ("tier1", "tier2")]
      exact = st.get((name, "exact"), 0) // repeat
      print(f"{name:8} {fmt:8} {t_ours / n * 1e9:9.1f} {t_np / n * 1e9:10.1f} {t_ours / t_np:7.1f}   "
            f"{shares[0]:8.4%} {shares[1]:8.4%} {exact:6d}")


# ---------------------------------------------------------------------- error measurement
def _mp_reference(name, prec=200):
  def exp2(x): return L.mpf_exp(L.mpf_mul(L.from_float(x), L.mpf_ln2(prec + 20), prec + 20), prec)
  def log2(x): return L.mpf_div(L.mpf_log(L.from_float(x), prec + 20), L.mpf_ln2(prec + 20), prec)
  def sin(x): return L.mpf_sin(L.from_float(x), prec)
  def pow(a, b):
    t = L.mpf_mul(L.from_float(b), L.mpf_log(L.from_float(a), prec + 40), prec + 40)
    return L.mpf_exp(t, prec)
  return {"exp2": exp2, "log2": log2, "sin": sin, "pow": pow}[name]


def _errors(name, approx, args):
  """(max log2 relative error, max log2 of error / claimed bound) over the elements."""
  ref = _mp_reference(name)
  with np.errstate(all="ignore"):
    hi, lo, k, err = (np.broadcast_to(np.asarray(v), args[0].shape) for v in approx(*args))
  worst_rel = worst_ratio = -math.inf
  for i in range(args[0].size):
    v = ref(*[float(a[i]) for a in args])
    got = L.mpf_shift(L.mpf_add(L.from_float(float(hi[i])), L.from_float(float(lo[i]))), int(k[i]))
    diff = L.mpf_abs(L.mpf_sub(got, v, 80))
    if diff == L.fzero: continue
    rel = L.to_float(L.mpf_div(diff, L.mpf_abs(v), 53))
    bound = L.mpf_shift(L.from_float(float(err[i])), int(k[i]))
    ratio = L.to_float(L.mpf_div(diff, bound, 53))
    worst_rel, worst_ratio = max(worst_rel, math.log2(rel)), max(worst_ratio, math.log2(ratio))
  return worst_rel, worst_ratio


def error_inputs(name, rng, n, wide):
  """n arguments over the domain plus n/10 near the reduction boundaries (pow: bases
  near 1 with |t| near the limit, where log2's relative error is amplified most)."""
  fmt = "float64" if wide else "float32"
  m = max(n // 10, 1)
  if name == "exp2":
    f = crmath.FORMATS[fmt]
    x = np.concatenate([rng.uniform(f.qmin, f.emax + 1, n),
                        (rng.integers(-4096 * 140, 4096 * 127, m) + 0.5) / 4096 + rng.uniform(-1e-6, 1e-6, m)])
    return (crmath.round_to(x, fmt),)
  if name == "log2":
    near1 = 1 + rng.uniform(-1, 1, m) * np.exp2(rng.uniform(-60 if wide else -23, -7, m))
    edges = 256.0 / (rng.integers(182, 362, m) + 0.5) * (1 + rng.uniform(-1e-9, 1e-9, m))
    return (crmath.round_to(np.concatenate([random_bits(rng, n, wide, True), near1, edges]), fmt),)
  if name == "sin":
    k = rng.integers(1, 1 << 20, m)
    near = k * (np.pi / 2) * (1 + rng.uniform(-1e-12, 1e-12, m))
    small = rng.uniform(-1, 1, m) * np.exp2(rng.uniform(-30, -10, m))
    return (crmath.round_to(np.concatenate([random_bits(rng, n, wide), near, small]), fmt),)
  near1 = 1 + rng.choice([-1, 1], m) * np.exp2(rng.uniform(-52 if wide else -23, -1, m))
  a = crmath.round_to(np.concatenate([np.exp2(rng.uniform(-126, 126, n)), near1]), fmt)
  limit = 1070 if wide else 140
  t = np.concatenate([rng.uniform(-limit, limit, n), rng.choice([-1, 1], m) * rng.uniform(limit - 60, limit, m)])
  with np.errstate(all="ignore"):
    b = crmath.round_to(t / np.log2(a), fmt)
    th = b * np.log2(a)
  keep = np.isfinite(b) & (np.abs(th) < limit + 1) & (a != 1)
  return a[keep], b[keep]


def measure(n):
  rng = np.random.default_rng(7)
  print(f"max log2 relative error / max log2(error / claimed bound), {n} + {n // 10} arguments each")
  for name, mod in MODULES.items():
    for tier, wide in (("approx1", False), ("approx2", False), ("approx2", True)):
      args = error_inputs(name, rng, n, wide)
      rel, ratio = _errors(name, getattr(mod, tier), args)
      label = f"{name} {tier.replace('approx', 'tier ')} ({'float64' if wide else 'float32'} args)"
      print(f"  {label:36} rel 2^{rel:7.1f}   error/bound 2^{ratio:6.1f}")


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--n", type=int, default=1_000_000)
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--errors", type=int, default=0, metavar="N")
  opts = ap.parse_args()
  if opts.errors: measure(opts.errors)
  else: bench(opts.n, opts.repeat)


if __name__ == "__main__":
  main()
