"""Measures how accurate the float decompositions are: the maximum distance, in ulps, of
each decomposed op's expanded graph (run by the reference evaluator) from the correctly
rounded result, per dtype. The correctly rounded result is the op computed in float64
and rounded once (long double for float64 results). These measurements back the figures
in ops.yaml `tolerances`.

  python tools/decomp_accuracy.py [--n 200000] [--ops EXP2,LOG2,SIN,SQRT,POW,DIV] [--seed 0]

float16 and bfloat16 unary ops run over every value; float32 and float64 over random
bit patterns plus the regions where each op is hardest (extreme exponents for SQRT, the
floats nearest n*pi/2 for SIN, large |b*log2(a)| for POW). Only inputs inside the op's
domain (tinyspec.tolerance.in_domain) are counted.
"""
from __future__ import annotations
import argparse
import sys
import time
import numpy as np
if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()
from tinyspec.refimpl import evaluate
from tinyspec import Graph, Node
from tinyspec.dtypes import dtype as D
from tinyspec.intervals import np_dtype
from tinyspec.decompose import decompose
from tinyspec.tables import tables
from tinyspec.tolerance import in_domain, tolerance, ulp_distance

FLOATS = ("float16", "bfloat16", "float32", "float64")
EXACT = {"EXP2": np.exp2, "LOG2": np.log2, "SIN": np.sin, "SQRT": np.sqrt, "POW": np.power, "DIV": np.divide}
DOMAIN_MAX = {"float32": 1e5, "float64": 1e6, "float16": 65504.0, "bfloat16": 1e5}


def correctly_rounded(op, dt, xs):
  wide = np.longdouble if dt == "float64" else np.float64
  with np.errstate(all="ignore"):
    return EXACT[op](*[x.astype(wide) for x in xs]).astype(np_dtype(dt))


def expanded(op, dt, xs):
  nodes, srcs = [], []
  for k, x in enumerate(xs):
    nodes += [Node("VCONST", (), {"values": list(x.shape), "dtype": "index"}),
              Node("BUFFER", (2 * k,), {"slot": k, "dtype": dt, "device": "CPU"})]
    srcs.append(2 * k + 1)
  g = decompose(Graph(nodes + [Node(op, srcs)]))
  return np.asarray(evaluate(g, {f"buf{k}": x for k, x in enumerate(xs)})["out0"])


def random_bits(dt, n, rng):
  w = D(dt).itemsize
  u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[w]
  return rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(np_dtype(dt))


def samples(op, dt, n, rng) -> list[np.ndarray]:
  npd = np_dtype(dt)
  unary = len([s for s in tables().ops[op].slots if not s.optional]) == 1
  if unary and D(dt).itemsize == 2:
    return [np.arange(2 ** 16, dtype=np.uint16).view(npd)]
  bits = random_bits(dt, n, rng)
  if op == "EXP2":
    lo, hi = {"float32": (-151, 129), "float64": (-1076, 1025)}.get(dt, (-30, 20))
    return [np.concatenate([bits, rng.uniform(lo, hi, n).astype(npd), rng.uniform(-1, 1, n).astype(npd)])]
  if op in ("LOG2", "SQRT"):
    e = D(dt).mantissa + 2 ** (D(dt).exponent - 1)   # |log2| of the smallest denormal, roughly
    ext = np.exp2(np.concatenate([rng.uniform(-e, -e + 40, n), rng.uniform(e * 0.45, e * 0.5, n)])) * rng.uniform(1, 2, 2 * n)
    return [np.concatenate([np.abs(bits), ext.astype(npd), (1 + rng.uniform(-1e-3, 1e-3, n)).astype(npd)])]
  if op == "SIN":
    dom = DOMAIN_MAX[dt]
    pio2 = np.longdouble("1.57079632679489661923132169163975144")
    k = np.arange(1, int(dom / 1.5707963) + 1, dtype=np.longdouble)
    near = (k * pio2).astype(npd)
    near = np.concatenate([near, np.nextafter(near, npd.type(np.inf)), np.nextafter(near, npd.type(-np.inf))])
    x = np.concatenate([bits, rng.uniform(-dom, dom, n).astype(npd), rng.uniform(-4, 4, n).astype(npd), near, -near])
    return [x]
  if op == "POW":
    m = np.concatenate([rng.uniform(-64, 64, n), rng.choice([-1, 1], n) * rng.uniform(48, 64, n)])
    b = rng.uniform(0.01, 4, 2 * n) * rng.choice([-1, 1], 2 * n)
    with np.errstate(all="ignore"):
      a = np.exp2(m / b).astype(npd)
    return [a, b.astype(npd)]
  if op == "DIV":
    tiny, big = D(dt).normal_range
    lo, hi = np.log2(tiny), np.log2(big)
    a = (rng.uniform(1, 2, n) * np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1, 1], n)).astype(npd)
    b = (rng.uniform(1, 2, n) * np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1, 1], n)).astype(npd)
    return [a, b]
  raise KeyError(op)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--n", type=int, default=200_000, help="random samples per region")
  ap.add_argument("--ops", default=",".join(EXACT), help="comma-separated ops")
  ap.add_argument("--seed", type=int, default=0)
  a = ap.parse_args(argv)
  np.seterr(all="ignore")   # the samples include overflowing and NaN values on purpose
  rng = np.random.default_rng(a.seed)
  print(f"{'op':6} {'dtype':9} {'inputs':>9} {'max ulp':>8} {'table':>6}   worst input")
  worst_over = 0
  for op in a.ops.split(","):
    for dt in FLOATS:
      t0 = time.time()
      xs = samples(op, dt, a.n, rng)
      xs = [x[np.isfinite(x.astype(np.float64))] if len(xs) == 1 else x for x in xs]
      inside = in_domain(op, dt, xs, decomposed=True)
      xs = [np.ascontiguousarray(np.broadcast_to(x, inside.shape)[inside]) for x in xs]
      got, want = expanded(op, dt, xs), correctly_rounded(op, dt, xs)
      d = ulp_distance(got, want)
      i = int(np.argmax(d))
      bound, _ = tolerance(op, dt, decomposed=True)
      worst_over = max(worst_over, d[i] - bound)
      print(f"{op:6} {dt:9} {len(d):9d} {d[i]:8.0f} {bound:6.0f}   {[x[i] for x in xs]} -> {got[i]!r}, want {want[i]!r}  ({time.time() - t0:.1f}s)")
      sys.stdout.flush()
  return 0 if worst_over <= 0 else 1


if __name__ == "__main__":
  sys.exit(main())
