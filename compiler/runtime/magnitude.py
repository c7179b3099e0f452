"""The largest finite magnitude a buffer holds: what a kernel's contract.Guard
(compiler/analysis/contract.py) asks before each launch, to pick its fused variant. The
scan's definition; each runtime runs it (compiler/runtime/c.py largest_finite on host
buffers, in slices on its threads; compiler/runtime/opencl.py largest_finite_cl on the
device).

One pass over the buffer's bits: |x| is x's bits without the sign, an infinity or NaN
has every exponent bit set (and is skipped), and nonnegative IEEE values order as their
bits do, so the scan is an unsigned max (no float compare, no rounding): in C over
64-byte vectors, in OpenCL a strided share per work item and a tree per work-group.
"""
from __future__ import annotations
import math
from tinyspec.dtypes import dtype as _dt

# one function per storage width; lanes of 64 bytes (GCC and Clang vector extensions)
C_SOURCE = r"""
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

# OpenCL: each work item a strided share, each work-group's maxima combined in local
# memory (a tree, a barrier a step); the host combines one value per group
CL_SOURCE = r"""
#define SCAN(W, T)                                                                      \
__kernel void largest_finite##W(__global const T* p, ulong n, T mask, T inf, __global T* out) { \
  __local T part[CL_ITEMS];                                                             \
  T m = 0;                                                                              \
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {                    \
    T b = p[i] & mask;                                                                  \
    if (b < inf && b > m) m = b;                                                        \
  }                                                                                     \
  uint l = get_local_id(0);                                                             \
  part[l] = m;                                                                          \
  barrier(CLK_LOCAL_MEM_FENCE);                                                         \
  for (uint s = CL_ITEMS / 2; s > 0; s >>= 1) {                                         \
    if (l < s && part[l + s] > part[l]) part[l] = part[l + s];                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                                       \
  }                                                                                     \
  if (l == 0) out[get_group_id(0)] = part[0];                                           \
}
SCAN(16, ushort)
SCAN(32, uint)
SCAN(64, ulong)
"""


def layout(dt: str) -> tuple:
  """(storage bits, the mask that clears the sign, the bits of infinity) of float dtype dt."""
  D = _dt(dt)
  return D.bits, (1 << (D.bits - 1)) - 1, ((1 << D.exponent) - 1) << D.mantissa


def value(bits: int, dt: str) -> float:
  """The nonnegative value of a finite float's bits (any IEEE-style layout: bfloat16 too)."""
  D = _dt(dt)
  e, m = bits >> D.mantissa, bits & ((1 << D.mantissa) - 1)
  bias = (1 << (D.exponent - 1)) - 1
  if e == 0: return math.ldexp(m, 1 - bias - D.mantissa)
  return math.ldexp(m | (1 << D.mantissa), e - bias - D.mantissa)
