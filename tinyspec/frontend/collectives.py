"""Multi-device collectives of the Dialect document (spec/sources.yaml), composed as it
writes them.

D = (d_0, ..., d_{n-1}) is an n-tuple device. COPY to an n-tuple device reshards along
axis 0 and never changes shape. The document's free variables are read from the arguments:
n = len(D), s (or n*s) = T.shape[0]. The comments give the result's shape, device and
axis property (the `axis` the tables derive: 0 when sharded, None when replicated or on
one device).
"""
from __future__ import annotations
from tinyspec.frontend.tensor import Tensor


# ---- T has shape (s,) on a single device.
def broadcast(T: Tensor, D: tuple) -> Tensor:
  """Replicate T to all n devices."""
  n, s = len(D), T.shape[0]
  return T.reshape(1, s).expand(n, s).copy(D).replicated(0)   # (s,) on D, axis=None


def scatter(T: Tensor, D: tuple) -> Tensor:
  """Split T into n chunks, one per device (s divisible by n)."""
  return T.copy(D)                                   # (s,) on D, axis=0


# ---- T has shape (n*s,) on D with axis=0: each device holds s elements.
def gather(T: Tensor, D: tuple) -> Tensor:
  """Collect all shards onto one device."""
  return T.copy(D[0])                                # (n*s,) on D[0], axis=None


def reduce(T: Tensor, D: tuple) -> Tensor:
  """Gather, then sum the shards."""
  n, s = len(D), T.shape[0] // len(D)
  return gather(T, D).reshape(n, s).sum(0)           # (s,) on D[0], axis=None


def allgather(T: Tensor, D: tuple) -> Tensor:
  """Collect all shards and replicate the whole to every device."""
  n, ns = len(D), T.shape[0]
  return T.reshape(1, ns).expand(n, ns).copy(D).replicated(0)   # (n*s,) on D, axis=None


def reduce_scatter(T: Tensor, D: tuple) -> Tensor:
  """Sum the shards across devices; each device keeps s/n of the sum (s divisible by n)."""
  n, s = len(D), T.shape[0] // len(D)
  return T.reshape(n, n, s // n).permute(1, 0, 2).copy(D).sum(1).reshape(s)   # (s,) on D, axis=0


def allreduce(T: Tensor, D: tuple) -> Tensor:
  """reduce_scatter, then allgather: every device holds the sum of the shards."""
  return allgather(reduce_scatter(T, D), D)          # (s,) on D, axis=None
