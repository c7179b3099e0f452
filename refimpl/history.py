"""Storage versions for refimpl/interpreter.py: a version is the list of writes made to a
storage so far (one per STORE and point), and versions that are not ordered with each other
merge by decision store-order (their common history, then the others' writes in graph
order: the STORE's node index, one STORE's writes in the order they were made).

Versions share their common part (a linked list), and each keeps jumps to its ancestors 1,
2, 4 ... writes back, so that finding whether one version extends another, or where two
part, takes a few steps however long the histories grow.
"""
from __future__ import annotations


class History:
  """A version of one storage: its writes, oldest first, as a linked list (with jumps to
  ancestors 1, 2, 4 ... writes back, so that an ancestor is found in a few steps)."""
  __slots__ = ("key", "parent", "write", "depth", "jump")

  def __init__(self, key, parent=None, write=None):
    self.key, self.parent, self.write = key, parent, write
    self.depth = 0 if parent is None else parent.depth + 1
    self.jump = [] if parent is None else [parent]   # jump[k]: the ancestor 2**k writes back
    while self.jump and len(self.jump) - 1 < len(self.jump[-1].jump): self.jump.append(self.jump[-1].jump[len(self.jump) - 1])

  def up(self, depth: int) -> "History":
    """The ancestor at `depth`."""
    h = self
    while h.depth > depth: h = next(j for j in reversed(h.jump) if j.depth >= depth)
    return h


class Write:
  """One STORE at one point: where (`path` from the storage root), what, and whether."""
  __slots__ = ("node", "point", "path", "value", "on", "add")

  def __init__(self, node, point, path, value, on, add):
    self.node, self.point, self.path, self.value, self.on, self.add = node, point, path, value, on, add


def merge(a: History | None, b: History | None) -> History | None:
  """The version a reader ordered after both a and b sees (decision store-order): their
  common history, then every other write of either (each once) in graph order."""
  if a is None or b is None or a is b: return a or b
  if a.depth >= b.depth and a.up(b.depth) is b: return a
  if b.depth >= a.depth and b.up(a.depth) is a: return b
  base = _common(a, b)
  above_a, above_b = _writes_above(a, base), _writes_above(b, base)
  ia = {id(w) for w in above_a}
  if all(id(w) in ia for w in above_b): return a
  if ia <= {id(w) for w in above_b}: return b
  rest = sorted(above_a + [w for w in above_b if id(w) not in ia], key=lambda w: w.node)   # stable: each one's writes keep their order
  for w in rest: base = History(base.key, base, w)
  return base


def _writes_above(h: History, base: History) -> list:
  out = []
  while h is not base: out.append(h.write); h = h.parent
  return out[::-1]


def merge_all(effects) -> dict:
  """The versions a reader ordered after all of `effects` ({storage key: History}) sees:
  merge() of all of them at once (a common history, then the others' writes in graph order)."""
  groups: dict = {}
  for e in effects:
    for k, h in (e or {}).items(): groups.setdefault(k, []).append(h)
  return {k: hs[0] if len(hs) == 1 else _merge_many(hs) for k, hs in groups.items()}


def _merge_many(hs: list) -> History:
  heads: list = []   # the histories no later one contains
  for h in hs:
    if heads and (h is heads[-1] or (heads[-1].depth >= h.depth and heads[-1].up(h.depth) is h)): continue
    if heads and h.depth >= heads[-1].depth and h.up(heads[-1].depth) is heads[-1]: heads[-1] = h
    else: heads.append(h)
  if len(heads) <= 2: return merge(*heads) if len(heads) == 2 else heads[0]
  base = heads[0]
  for h in heads[1:]: base = _common(base, h)
  seen, writes, per_head = set(), [], []
  for h in heads:
    above = _writes_above(h, base)
    per_head.append(above)
    for w in above:
      if id(w) not in seen: seen.add(id(w)); writes.append(w)
  for h, above in zip(heads, per_head):
    if len(above) == len(writes): return h   # it holds every write of the others
  for w in sorted(writes, key=lambda w: w.node): base = History(base.key, base, w)
  return base


def _common(a: History, b: History) -> History:
  """The latest history both a and b extend."""
  x, y = a.up(min(a.depth, b.depth)), b.up(min(a.depth, b.depth))
  if x is y: return x
  for k in reversed(range(len(x.jump))):
    if k < len(x.jump) and x.jump[k] is not y.jump[k]: x, y = x.jump[k], y.jump[k]
  return x.parent
