"""THREEFRY: Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", SC'11; the Random123 reference), on uint64 operands.

Word order (ops.yaml semantics): the counter X and the key K are each two 32-bit words,
the LOW word first: x0 = X & 0xffffffff, x1 = X >> 32. The result packs (x0, x1) the same
way. Checked against Random123's known-answer vectors in tests/refimpl/test_refimpl_ops.py."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit

ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)   # Random123 R_32x2 rotation constants
PARITY = 0x1BD11BDA                            # Threefish key-schedule parity constant
ROUNDS = 20
_U32, _U64 = np.uint32, np.uint64


def _rotl(x, r): return (x << _U32(r)) | (x >> _U32(32 - r))


def threefry2x32(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  x, key = np.broadcast_arrays(np.asarray(x, _U64), np.asarray(key, _U64))
  x0, x1 = (x & _U64(0xFFFFFFFF)).astype(_U32), (x >> _U64(32)).astype(_U32)
  k0, k1 = (key & _U64(0xFFFFFFFF)).astype(_U32), (key >> _U64(32)).astype(_U32)
  ks = (k0, k1, k0 ^ k1 ^ _U32(PARITY))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(ROUNDS):
    x0 = x0 + x1
    x1 = _rotl(x1, ROTATIONS[i % 8]) ^ x0
    if i % 4 == 3:   # key injection after every group of four rounds
      s = (i + 1) // 4
      x0 = x0 + ks[s % 3]
      x1 = x1 + ks[(s + 1) % 3] + _U32(s)
  return x0.astype(_U64) | (x1.astype(_U64) << _U64(32))


@unit("THREEFRY")
def threefry(ctx, x, key):
  with np.errstate(over="ignore"):
    return threefry2x32(x, key)
