"""Backends with one planted bug each, for the fuzzer's test (tests/conformance/test_fuzz_planted.py):
the reference evaluator with the unit of one op swapped for a wrong one while it runs.
Each bug is one a renderer could plausibly make, and each is wrong under every result
the spec allows (so it stays a bug if a decision is relaxed)."""
from __future__ import annotations
import dataclasses
import numpy as np
from tinyspec.refimpl.backend import RefBackend


def truncating_idiv(ctx, a, b):
  """C's `/`: rounds toward zero instead of down (decision idiv-mod); a/0 = 0 and
  MIN/-1 = MIN kept. Computed on Python integers (exact at 64 bits)."""
  def q(x, y):
    x, y = int(x), int(y)
    if y == 0: return 0
    r = abs(x) // abs(y)
    return r if (x < 0) == (y < 0) else -r
  a, b = np.broadcast_arrays(a, b)
  bits, signed = a.dtype.itemsize * 8, a.dtype.kind == "i"
  def wrapped(x, y):   # into the dtype's range, as C's int arithmetic wraps
    v = q(x, y) % (1 << bits)
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v
  return np.array([wrapped(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist())], dtype=a.dtype).reshape(a.shape)


def nan_dropping_max(good):
  """C's fmax: a NaN operand is dropped and the other returned; every other pair as the
  reference has it. Wrong when the first operand is NaN under IEEE maximum and under
  tinygrad's (a<b)?b:a alike."""
  def max_(ctx, a, b):
    r = good(ctx, a, b)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16": return r
    an, bn = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    return np.where(an & ~bn, b, np.where(bn & ~an, a, r)).astype(r.dtype)
  return max_


def off_by_one_pad(ctx, x, _o, _s):
  """PAD whose copy loop stops one short on the last axis: the source's last column is
  left as padding (zero)."""
  o = ctx.shape_value(1)
  out = np.zeros(ctx.shape, x.dtype)
  if x.ndim == 0 or x.shape[-1] == 0: return out if x.ndim else x.copy()
  region = tuple(slice(a, a + n) for a, n in zip(o, x.shape))
  out[region] = x
  last = tuple(list(region[:-1]) + [o[-1] + x.shape[-1] - 1])
  out[last] = 0
  return out


# op -> the wrong unit, given the right one
PLANTED = {"IDIV": lambda good: truncating_idiv, "MAX": nan_dropping_max, "PAD": lambda good: off_by_one_pad}


class PlantedBackend(RefBackend):
  """The reference evaluator with op `op`'s unit replaced by PLANTED[op] during run()."""
  def __init__(self, op: str):
    self.op, self.name = op, f"planted-{op.lower()}"

  def run(self, graph, inputs):
    from tinyspec.refimpl.unit import UNITS
    good = UNITS[self.op]
    UNITS[self.op] = dataclasses.replace(good, fn=PLANTED[self.op](good.fn))
    try: return super().run(graph, inputs)
    finally: UNITS[self.op] = good
