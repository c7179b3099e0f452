"""Error-free transformations and double-double helpers built from IEEE-exact operations.

NumPy has no fused multiply-add, so an exact product uses Dekker's TwoProduct with
Veltkamp's split, and an exact sum Knuth's TwoSum (or Dekker's Fast2Sum when the
operands are ordered). Every helper works elementwise on float64 arrays or scalars and
uses only + - * on float64, so it gives the same bits on every host.

Exactness needs no overflow or underflow in the intermediates: `split` computes
(2^27 + 1) * a, so |a| must stay below ~2^996, and the error terms of `two_prod` must stay
above the subnormal range. The callers keep their operands O(1) (results are carried as
hi + lo times a separate power of two), and say where a tiny operand makes the low-order
term underflow harmlessly.
"""
from __future__ import annotations

SPLITTER = 134217729.0   # 2^27 + 1: splits a double into two halves of at most 26 bits


def two_sum(a, b):
  """(s, e) with s = fl(a + b) and s + e = a + b exactly (any a, b)."""
  s = a + b
  bb = s - a
  return s, (a - (s - bb)) + (b - bb)


def fast_two_sum(a, b):
  """(s, e) with s + e = a + b exactly, provided a == 0 or exponent(a) >= exponent(b)."""
  s = a + b
  return s, b - (s - a)


def split(a):
  """(hi, lo) with hi + lo = a exactly, each fitting in 26 bits (Veltkamp)."""
  t = SPLITTER * a
  hi = t - (t - a)
  return hi, a - hi


def two_prod(a, b):
  """(p, e) with p = fl(a * b) and p + e = a * b exactly (Dekker)."""
  p = a * b
  ah, al = split(a)
  bh, bl = split(b)
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl

