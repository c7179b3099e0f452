"""The largest finite magnitude a buffer holds: what a kernel's contract.Guard
(compiler/analysis/contract.py) asks before each launch, to pick its fused variant.

One pass over the buffer's bits: |x| is x's bits without the sign, an infinity or NaN
has every exponent bit set (and is skipped), and nonnegative IEEE values order as their
bits do, so the scan is an unsigned max over 64-byte vectors (no float compare, no
rounding). Large host buffers are scanned in slices on the C runtime's threads; an
OpenCL buffer by a scan kernel on its device (largest_finite_cl).
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


# OpenCL: each work item a strided share, each work-group's maxima combined in local
# memory (a tree, a barrier a step); the host combines one value per group
_CL_SOURCE = r"""
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
GROUPS_PER_UNIT = 4


def _cl_items(dev) -> int:
  """Work items per scan group: 256 or the device's largest power of two below it."""
  n = 256
  while n > max(1, int(dev.max_work_group_size)): n //= 2
  return n


_CL: dict = {}


def _cl_scanner():
  """(queue, scan kernel per width, items per group, groups, result buffer) for the selected device."""
  import pyopencl as cl
  from tinyspec.compiler.runtime.opencl import Built, device
  ctx, queue, dev = device()
  got = _CL.get(id(ctx))
  if got is None:
    items = _cl_items(dev)
    groups = max(1, int(dev.max_compute_units)) * GROUPS_PER_UNIT
    built = Built(f"#define CL_ITEMS {items}\n" + _CL_SOURCE)
    kernels = {w: cl.Kernel(built.prg, f"largest_finite{w}") for w in (16, 32, 64)}
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, groups * 8)
    got = _CL[id(ctx)] = (ctx, built.queue, kernels, items, groups, out)
  return got[1:]


def largest_finite_cl(buffers: list) -> list[float]:
  """largest_finite for OpenCL buffers (cl.Buffer, dtype, elements), on the device: the
  scans run in the queue after what was enqueued before them; the values are read back."""
  import numpy as np
  import pyopencl as cl
  queue, kernels, items, groups, out = _cl_scanner()
  U = {16: np.uint16, 32: np.uint32, 64: np.uint64}
  res = []
  for buf, dt, n in buffers:
    D = _dt(dt)
    mask, inf = (1 << (D.bits - 1)) - 1, ((1 << D.exponent) - 1) << D.mantissa
    kernels[D.bits](queue, (groups * items,), (items,), buf, np.uint64(n), U[D.bits](mask), U[D.bits](inf), out)
    parts = np.empty(groups, U[D.bits])
    cl.enqueue_copy(queue, parts, out)      # (blocking: the guard decides the next launch)
    res.append(_value(int(parts.max()) if n else 0, D))
  return res
