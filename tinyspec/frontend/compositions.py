"""The common ops of the Dialect document ("Common Ops as Compositions", spec/sources.yaml),
composed from primitives exactly as it writes them. Each comment gives the shapes along the way.

Index tensors (gather's idx, scatter_add's idx) must be int32: they are compared with
arange, which counts in the dtype of Tensor(1) (a Python int, so int32).
"""
from __future__ import annotations
from tinyspec.frontend.tensor import Tensor


def gemm(A: Tensor, B: Tensor) -> Tensor:
  """C[M,N] = A[M,K] @ B[K,N]: broadcast multiply to (M,K,N), sum over K."""
  M, K = A.shape; _, N = B.shape
  return (A.reshape(M, K, 1) * B.reshape(1, K, N)).sum(1)


def prefix_sum(T: Tensor) -> Tensor:
  """Cumulative sum of a 1-D T (n >= 1): tile the zero-padded T with period 2n-1 and read
  it back with period 2n, so row i holds the window T[i-n+1 .. i]; sum the rows."""
  n = T.shape[0]
  x = T.pad((n - 1, 0))                               # (2n-1,)
  x = x.reshape(1, 2 * n - 1).expand(n + 1, 2 * n - 1)   # tile
  x = x.reshape((n + 1) * (2 * n - 1)).shrink_to(2 * n * n)   # trim
  x = x.reshape(n, 2 * n).shrink_to(n, n)             # windows
  return x.sum(-1)                                    # reduce


def arange(n: int) -> Tensor:
  """[0, 1, ..., n-1] (int32): prefix_sum of n ones is [1, ..., n]; subtract 1."""
  return prefix_sum(Tensor(1).reshape(1).expand(n)) - 1


Tensor.arange = staticmethod(arange)   # type: ignore[attr-defined]  # a composition of Tensor's own methods, so it is attached here


def gather(T: Tensor, idx: Tensor) -> Tensor:
  """out[i] = T[idx[i]]: a one-hot mask along the gather axis, then a reduce."""
  K = T.shape[0]
  pos = arange(K).reshape(K, 1)                       # (K, 1)
  mask = (pos == idx.reshape(1, -1)).cast(T.dtype)    # (K, D)
  return (T.reshape(K, 1) * mask).sum(0)              # (D,)


def scatter_add(T: Tensor, idx: Tensor, val: Tensor) -> Tensor:
  """T[idx[i]] += val[i] (repeated indices accumulate)."""
  K, D = T.shape[0], idx.shape[0]
  pos = arange(K).reshape(K, 1)                       # (K, 1)
  mask = (pos == idx.reshape(1, D)).cast(T.dtype)     # (K, D)
  return T + (mask * val.reshape(1, D)).sum(1)        # (K,)
