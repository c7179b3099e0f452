"""The largest finite magnitude a host buffer holds: what a kernel's contract.Guard
(compiler/analysis/contract.py) asks before each launch, to pick its fused variant.

One pass over the buffer's bits: |x| is x's bits without the sign, an infinity or NaN
has every exponent bit set (and is skipped), and nonnegative IEEE values order as their
bits do, so the scan is an unsigned max over 64-byte vectors (no float compare, no
rounding). Large buffers are scanned in slices on the C runtime's threads.
"""
from __future__ import annotations
import ctypes
import math
from functools import lru_cache
from tinyspec.dtypes import dtype as _dt

# one function per storage width; lanes of 64 bytes (GCC and Clang vector extensions)
_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#define SCAN(W)                                                                         \
typedef uint##W##_t u##W##v __attribute__((vector_size(64)));                           \
uint##W##_t largest_finite##W(const uint##W##_t* p, int64_t lo, int64_t hi,             \
                              uint##W##_t mask, uint##W##_t inf) {                     \
  u##W##v m = {0}, b, keep;                                                             \
  const int64_t L = 64 / sizeof(uint##W##_t);                                           \
  int64_t i = lo;                                                                       \
  for (; i + L <= hi; i += L) {                                                         \
    memcpy(&b, p + i, 64);                                                              \
    b &= mask;                                                                          \
    b &= (u##W##v)(b < inf);                                                            \
    keep = (u##W##v)(b > m);                                                            \
    m = (b & keep) | (m & ~keep);                                                       \
  }                                                                                     \
  uint##W##_t r = 0;                                                                    \
  for (int64_t k = 0; k < L; k++) r = m[k] > r ? m[k] : r;                              \
  for (; i < hi; i++) { uint##W##_t x = p[i] & mask; if (x < inf && x > r) r = x; }      \
  return r;                                                                             \
}
SCAN(16)
SCAN(32)
SCAN(64)
"""

SLICE = 1 << 16     # elements of one task at least: below it a thread's start costs more than it saves


@lru_cache(maxsize=None)
def _scanner(bits: int):
  from tinyspec.compiler.runtime.c import load
  u = {16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}[bits]
  f = getattr(load(_SOURCE), f"largest_finite{bits}")
  f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, u, u]
  f.restype = u
  return f


def largest_finite(buffers: list, threads: int = 1) -> list[float]:
  """max |x| over the finite x of each buffer (address, dtype, elements): 0.0 where none.
  The buffers are cut into about `threads` tasks of similar size: this thread scans the
  first, the C runtime's threads the others."""
  tasks, layouts = [], []
  total = sum(n for _, _, n in buffers)
  step = max(SLICE, -(-total // max(1, threads)))
  for k, (ptr, dt, n) in enumerate(buffers):
    D = _dt(dt)
    layouts.append(D)
    mask, inf = (1 << (D.bits - 1)) - 1, ((1 << D.exponent) - 1) << D.mantissa
    tasks += [(k, _scanner(D.bits), ptr, lo, min(lo + step, n), mask, inf) for lo in range(0, n, step)]
  bits = [0] * len(buffers)
  if threads > 1 and len(tasks) > 1:
    from tinyspec.compiler.runtime.c import _pool
    futs = [(k, _pool(threads - 1).submit(f, *a)) for k, f, *a in tasks[1:]]
    k, f, *a = tasks[0]
    bits[k] = f(*a)
    for k, fut in futs: bits[k] = max(bits[k], fut.result())
  else:
    for k, f, *a in tasks: bits[k] = max(bits[k], f(*a))
  return [_value(b, D) for b, D in zip(bits, layouts)]


def _value(bits: int, D) -> float:
  """The nonnegative value of a finite float's bits (any IEEE-style layout: bfloat16 too)."""
  e, m = bits >> D.mantissa, bits & ((1 << D.mantissa) - 1)
  bias = (1 << (D.exponent - 1)) - 1
  if e == 0: return math.ldexp(m, 1 - bias - D.mantissa)
  return math.ldexp(m | (1 << D.mantissa), e - bias - D.mantissa)
