"""The Dialect document's "Common Ops as Compositions" (spec/sources.yaml), written with
tinygrad's Tensor API exactly as it writes them, so an import shows what tinygrad makes of
the spec's own examples; `inputs`, shared by every program in this folder."""
from tinygrad import Tensor, dtypes


def gemm(A, B):
  M, K = A.shape; _, N = B.shape
  return (A.reshape(M, K, 1) * B.reshape(1, K, N)).sum(1)


def prefix_sum(T):
  n = T.shape[0]
  x = T.pad((n - 1, 0))                                  # (2n-1,)
  x = x.reshape(1, 2 * n - 1).expand(n + 1, 2 * n - 1)   # tile
  x = x.reshape((n + 1) * (2 * n - 1)).shrink_to(2 * n * n)   # trim
  x = x.reshape(n, 2 * n).shrink_to(n, n)                # windows
  return x.sum(-1)                                       # reduce


def arange(n):
  # Tensor(1) would be tinygrad's weak int, which cannot be realized: say int32
  return prefix_sum(Tensor(1, dtype=dtypes.int32).reshape(1).expand(n)) - 1


def gather(T, idx):
  K = T.shape[0]
  pos = arange(K).reshape(K, 1)                          # (K, 1)
  mask = (pos == idx.reshape(1, -1)).cast(T.dtype)       # (K, D)
  return (T.reshape(K, 1) * mask).sum(0)                 # (D,)


def scatter_add(T, idx, val):
  K, D = T.shape[0], idx.shape[0]
  pos = arange(K).reshape(K, 1)                          # (K, 1)
  mask = (pos == idx.reshape(1, D)).cast(T.dtype)        # (K, D)
  return T + (mask * val.reshape(1, D)).sum(1)           # (K,)


def inputs(*arrays):
  """Realized tinygrad tensors holding the given NumPy arrays (the programs' inputs)."""
  return [Tensor(a).realize() for a in arrays]
