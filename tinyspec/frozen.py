"""Immutable, hashable forms of JSON values (args), so UOps can be hash-consed.

Keys distinguish what Python's == merges: -0.0 from 0.0, True from 1, 1 from 1.0.
"""
from __future__ import annotations
import math


class FrozenDict(dict):
  """A JSON object as an immutable dict whose keys also read as attributes (arg.dtype)."""
  __slots__ = ("_hash",)

  def __getattr__(self, k):
    try: return self[k]
    except KeyError: raise AttributeError(k) from None

  def __hash__(self):
    try: return self._hash
    except AttributeError:
      self._hash = hash(key(self)); return self._hash

  def __reduce__(self):   # pickled as its items (a worker process sends graphs back), not item by item
    return (FrozenDict, (dict(self),))

  def _ro(self, *a, **k): raise TypeError("FrozenDict is immutable")
  __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _ro  # type: ignore[assignment]


_ATOMS = frozenset({type(None), str, int, bool, float})


def freeze(v):
  t = type(v)
  if t is dict or t is FrozenDict:
    for x in v.values():
      if type(x) not in _ATOMS: break
    else: return FrozenDict(v)   # flat (most args): one copy
    return FrozenDict({k: x if type(x) in _ATOMS else freeze(x) for k, x in v.items()})
  if t is list or t is tuple: return tuple([x if type(x) in _ATOMS else freeze(x) for x in v])
  if isinstance(v, dict): return FrozenDict({k: freeze(x) for k, x in v.items()})
  if isinstance(v, list): return tuple(freeze(x) for x in v)
  return v


def thaw(v):
  if isinstance(v, dict): return {k: thaw(x) for k, x in v.items()}
  if isinstance(v, tuple): return [thaw(x) for x in v]
  return v


def key(v):
  """A hashable key that tells apart values == would merge."""
  if v is None or isinstance(v, str): return v
  if isinstance(v, bool): return ("b", v)
  if isinstance(v, int): return v
  if isinstance(v, float): return ("f", "nan" if math.isnan(v) else v.hex())
  if isinstance(v, dict): return ("d",) + tuple(sorted((k, key(x)) for k, x in v.items()))
  if isinstance(v, (tuple, list)): return ("l",) + tuple(key(x) for x in v)
  return ("o", repr(v))
