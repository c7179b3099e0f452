"""A small pattern matcher and an iterative bottom-up graph rewriter.

Rewrite rules are data: a list of (pattern, function) pairs. A pattern names an op (or
a tuple of ops), optional source patterns, and names to bind; the function gets the
bound nodes as keyword arguments and returns a replacement UOp, or None to decline.

    Pat("ADD", (Pat.var("x"), Pat.cvar("c")))      # x + CONST, binds x and c

`graph_rewrite(roots, matcher)` rebuilds the graph bottom-up: sources first, then the
node with its new sources, then the rules until none applies. A rule's result is itself
rewritten (its new inner nodes included). No recursion: an explicit stack walks graphs of
any depth.
"""
from __future__ import annotations
from typing import Callable, Iterable
from tinyspec import uop
from tinyspec.uop import UOp


class Pat:
  __slots__ = ("ops", "src", "name", "pred", "commutative")

  def __init__(self, op=None, src=None, name: str | None = None, pred: Callable | None = None, commutative: bool = False):
    self.ops = (op,) if isinstance(op, str) else (tuple(op) if op is not None else None)
    self.src, self.name, self.pred, self.commutative = (tuple(src) if src is not None else None), name, pred, commutative

  @staticmethod
  def var(name: str, pred: Callable | None = None) -> "Pat":
    """Any node."""
    return Pat(None, None, name, pred)

  @staticmethod
  def cvar(name: str, pred: Callable | None = None) -> "Pat":
    """A CONST node."""
    return Pat("CONST", None, name, pred)

  def match(self, u: UOp, b: dict) -> bool:
    if self.ops is not None and u.op not in self.ops: return False
    if self.src is not None:
      if len(self.src) != len(u.src): return False
      orders = [u.src] if not (self.commutative and len(u.src) == 2) else [u.src, u.src[::-1]]
      for srcs in orders:
        trial = dict(b)
        if all(p.match(s, trial) for p, s in zip(self.src, srcs)):
          b.clear(); b.update(trial); break
      else:
        return False
    if self.name is not None:
      if self.name in b and b[self.name] is not u: return False
      b[self.name] = u
    if self.pred is not None and not self.pred(u): return False
    return True


class Matcher:
  """Rules indexed by op; the first rule that returns a node wins."""

  def __init__(self, rules: Iterable[tuple[Pat, Callable]]):
    self.rules = list(rules)
    self.by_op: dict[str, list] = {}

  def _for(self, op: str) -> list:
    """The rules that can match `op`, in table order."""
    r = self.by_op.get(op)
    if r is None: r = self.by_op[op] = [(p, f) for p, f in self.rules if p.ops is None or op in p.ops]
    return r

  def rewrite(self, u: UOp, ctx=None) -> UOp | None:
    for pat, fn in self._for(u.op):
      b: dict = {}
      if pat.match(u, b):
        if ctx is not None: b["ctx"] = ctx
        r = fn(**b)
        if r is not None and r is not u: return r
    return None

  def __add__(self, other: "Matcher") -> "Matcher": return Matcher(self.rules + other.rules)


class RewriteLimit(Exception):
  pass


def graph_rewrite(roots, matcher: Matcher, ctx=None, limit: int = 10_000_000) -> list[UOp] | UOp:
  """Rewrite the graphs under `roots` (a UOp or a list of them) to a fixpoint of `matcher`."""
  single = isinstance(roots, UOp)
  rl = [roots] if single else list(roots)
  memo: dict[UOp, UOp] = {}
  stack: list = [(r, 0, None) for r in reversed(rl)]
  steps = 0
  while stack:
    u, stage, extra = stack.pop()
    if stage == 0:
      if u in memo: continue
      stack.append((u, 1, None))
      for s in reversed(u.src):
        if s not in memo: stack.append((s, 0, None))
    elif stage == 1:
      if u in memo: continue
      new_src = tuple(memo[s] for s in u.src)
      n = u if all(a is b for a, b in zip(new_src, u.src)) else u.replace(src=new_src)
      steps += 1
      if steps > limit: raise RewriteLimit("rewrite did not reach a fixpoint")
      r = matcher.rewrite(n, ctx)
      if r is None:
        memo[u] = n
        if n is not u: memo[n] = n
      else:
        stack.append((u, 2, r))
        if r not in memo: stack.append((r, 0, None))
    else:
      memo[u] = memo[extra]
  return memo[rl[0]] if single else [memo[r] for r in rl]


def substitute(roots, mapping: dict, stop: Callable | None = None):
  """Replace nodes by mapping (UOp -> UOp) everywhere under roots, rebuilding consumers.
  `stop(u)` true: keep u and do not descend into it."""
  single = isinstance(roots, UOp)
  rl = [roots] if single else list(roots)
  memo: dict[UOp, UOp] = dict(mapping)
  stack = [(r, False) for r in reversed(rl)]
  while stack:
    u, done = stack.pop()
    if u in memo: continue
    if stop is not None and stop(u): memo[u] = u; continue
    if not done:
      stack.append((u, True))
      for s in reversed(u.src):
        if s not in memo: stack.append((s, False))
      continue
    new_src = tuple(memo[s] for s in u.src)
    memo[u] = u if all(a is b for a, b in zip(new_src, u.src)) else u.replace(src=new_src)
  return memo[rl[0]] if single else [memo[r] for r in rl]


def rebuild(root: UOp, fn: Callable) -> UOp:
  """Rebuild the graph under root bottom-up: each node gets its rebuilt sources, then
  fn(node) may return a replacement (None: keep it). Unlike substitute, replacements of
  nested nodes compose (the outer one is built on the inner one's result)."""
  memo: dict[UOp, UOp] = {}
  for u in toposort(root):
    src = tuple(memo[s] for s in u.src)
    x = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
    y = fn(x)
    memo[u] = x if y is None else y
  return memo[root]


def toposort(roots, srcs: Callable | None = None) -> list[UOp]:
  """Every node under roots, sources first; srcs(u): the sources to follow (default: all
  of u.src). The core's one walk (tinyspec.uop.toposort)."""
  return uop.toposort(roots, srcs=srcs)


def fold_up(u: UOp, memo: dict, f: Callable):
  """f(x, [memo[s] for s in x.src]) for u and every node below it that `memo` does not
  hold yet, sources first (iterative: no recursion limit); `memo` keeps the answers, so
  later calls stop at nodes already known. Returns memo[u]."""
  stack = [u]
  while stack:
    x = stack[-1]
    if x in memo: stack.pop(); continue
    todo = [s for s in x.src if s not in memo]
    if todo: stack.extend(todo); continue
    stack.pop()
    memo[x] = f(x, [memo[s] for s in x.src])
  return memo[u]


def ranges_open(x: UOp, below: list, closers: tuple = ("END", "REDUCE")) -> frozenset:
  """The RANGEs x runs inside of, given those of its sources: theirs, plus x if it is a
  RANGE, less those x closes when it is one of `closers`."""
  s = frozenset().union(*below) if below else frozenset()
  if x.op == "RANGE": return s | {x}
  if x.op in closers: return s - set(x.src[1:])
  return s


def consumers(nodes: list[UOp]) -> dict[UOp, list[UOp]]:
  """node -> the distinct nodes that use it (in toposort order)."""
  out: dict[UOp, list[UOp]] = {u: [] for u in nodes}
  for u in nodes:
    for s in dict.fromkeys(u.src): out[s].append(u)
  return out
