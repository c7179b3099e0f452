"""The rewrite engine: the one way a graph of UOps is changed.

A rewrite is a set of named rules. A rule is a pattern and a function: the pattern names
an op (or a tuple of ops), optional source patterns and names to bind; the function gets
the bound nodes as keyword arguments (and `ctx`, the rewrite's context, when it asks for
it) and returns a replacement UOp, or None to decline.

    Rule("fold_add", Pat("ADD", (Pat.var("x"), Pat.cvar("c"))), fn)    # x + CONST: binds x and c

`graph_rewrite(roots, rules, ctx)` rebuilds the graph bottom-up: sources first, then the
node with its new sources, then the rules. By default a rule's result is itself rewritten
(its new inner nodes included) until no rule applies: a fixed point. `once=True` applies
the rules once per node (a result is final). `top_down=True` tries the rules on each node
as it is, before its sources: a hit replaces it and is rewritten again (with `once`: is
final and not entered, a substitution). `enter(u, k)` says whether source k of u is
rewritten at all (the bodies a rewrite must not enter). A rule that builds one result from
several nodes (the reductions sharing one loop) asks for `rewrite`, which gives any node's
rewritten form within the same rewrite.
No recursion: an explicit stack walks graphs of any depth.

Every rule that fires is counted in the active trace (`tracing()`): the compiler's
`--explain` and the per-rule tests read it. `substitute` (a mapping applied everywhere) and
`rebuild` (a function applied once per node, bottom-up) are this engine with one rule.
"""
from __future__ import annotations
import inspect
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator
from tinyspec.uop import UOp


class Pat:
  """A pattern: an op (or ops, or any), source patterns, a name to bind, a predicate."""
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


@dataclass(frozen=True)
class Rule:
  """A named rewrite: `fn(**bound)` -> a replacement or None; fn also gets, when it names
  them, `ctx=` (the rewrite's context), `rewrite=` (the rewritten form of any other node of
  the same rewrite, for rules that build one result from several nodes) and `orig=` (the
  node as the graph had it, before its sources were rewritten: what a context computed
  ahead knows it as). `apply(u, ctx, rewrite, orig)` matches and calls it. Untraced rules
  (a substitution's mapping) are not counted in traces."""
  name: str
  pat: Pat
  fn: Callable
  traced: bool = True
  apply: Callable = field(init=False, repr=False, compare=False)   # set from the pattern and fn's parameters

  def __post_init__(self):
    params = inspect.signature(self.fn).parameters
    extra = [k for k in ("ctx", "rewrite", "orig") if k in params]
    bare = self.pat.ops is None and self.pat.src is None and self.pat.pred is None and self.pat.name is not None
    # a pattern that matches any node calls fn positionally (no binding: the common substitution is cheap)
    if bare and list(params) in ([self.pat.name], [self.pat.name, "ctx"]): apply = self._positional("ctx" in params)
    else: apply = self._matching(extra)
    object.__setattr__(self, "apply", apply)

  def _positional(self, wants_ctx: bool) -> Callable:
    fn = self.fn
    return (lambda u, ctx, rewrite, orig: fn(u, ctx)) if wants_ctx else (lambda u, ctx, rewrite, orig: fn(u))

  def _matching(self, extra: list) -> Callable:
    pat, fn = self.pat, self.fn
    def apply(u: UOp, ctx, rewrite, orig) -> UOp | None:
      b: dict = {}
      if not pat.match(u, b): return None
      if extra:
        if "ctx" in extra: b["ctx"] = ctx
        if "rewrite" in extra: b["rewrite"] = rewrite
        if "orig" in extra: b["orig"] = orig
      return fn(**b)
    return apply


class RuleSet:
  """Rules indexed by op; the first rule (in list order) that returns a node wins."""

  def __init__(self, rules: Iterable[Rule], name: str = ""):
    self.rules = list(rules)
    self.name = name
    names = [r.name for r in self.rules]
    if len(set(names)) != len(names): raise ValueError(f"rule set {name!r} names a rule twice: {sorted({n for n in names if names.count(n) > 1})}")
    self.by_op: dict[str, list[Rule]] = {}

  def _for(self, op: str) -> list[Rule]:
    """The rules that can match `op`, in list order."""
    r = self.by_op.get(op)
    if r is None: r = self.by_op[op] = [x for x in self.rules if x.pat.ops is None or op in x.pat.ops]
    return r

  def rewrite(self, u: UOp, ctx=None, rewrite: Callable | None = None, orig: UOp | None = None) -> UOp | None:
    for rule in self._for(u.op):
      r = rule.apply(u, ctx, rewrite, u if orig is None else orig)
      if r is not None and r is not u:
        if rule.traced and _TRACES: _TRACES[-1].count(rule.name, u.op)
        return r
    return None

  @staticmethod
  def named(pairs: Iterable[tuple[Pat, Callable]], name: str = "") -> "RuleSet":
    """Rules from (pattern, function) pairs, each named by its function (a table of
    functions with docstrings: a lambda has no name to trace)."""
    out = []
    for pat, fn in pairs:
      if fn.__name__ == "<lambda>": raise ValueError(f"rule set {name!r}: a rule needs a named function, not a lambda")
      out.append(Rule(fn.__name__, pat, fn))
    return RuleSet(out, name)

  def __getitem__(self, name: str) -> Rule:
    return next(r for r in self.rules if r.name == name)

  def __add__(self, other: "RuleSet") -> "RuleSet": return RuleSet(self.rules + other.rules, self.name or other.name)


# ------------------------------------------------------------------ traces
class Trace:
  """Which rule fired how often, per stage (`stage` is set by whoever runs the stages)."""

  def __init__(self):
    self.stage = ""
    self.fired: Counter = Counter()     # (stage, rule, op) -> times

  def count(self, rule: str, op: str) -> None: self.fired[(self.stage, rule, op)] += 1

  def times(self, rule: str, stage: str | None = None) -> int:
    return sum(n for (s, r, _), n in self.fired.items() if r == rule and (stage is None or s == stage))

  def by_stage(self) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for (s, r, _), n in self.fired.items(): out.setdefault(s, Counter())[r] += n
    return out


_TRACES: list[Trace] = []


def note(rule: str, op: str) -> None:
  """Count a rule that fired outside graph_rewrite (a schedule rule: one kernel into others)."""
  if _TRACES: _TRACES[-1].count(rule, op)


@contextmanager
def tracing(trace: Trace | None = None) -> Iterator[Trace]:
  """Count every traced rule that fires inside the block (nested blocks count in the innermost)."""
  t = trace if trace is not None else Trace()
  _TRACES.append(t)
  try: yield t
  finally: _TRACES.pop()


# ------------------------------------------------------------------ the engine
class RewriteLimit(Exception):
  """A rewrite that did not reach its fixed point within its step limit."""


class _Rewriter:
  """One rewrite: its rules, context, mode and memo (original node -> rewritten node).
  Calling it rewrites a node (and everything below it not done yet): the engine's loop,
  also what a rule's `rewrite=` is."""

  def __init__(self, rules: RuleSet, ctx, once: bool, top_down: bool, enter, limit: int):
    self.rules, self.ctx, self.once, self.top_down, self.enter, self.limit = rules, ctx, once, top_down, enter, limit
    self.memo: dict[UOp, UOp] = {}
    self.steps = 0
    self.running: set[UOp] = set()     # nodes whose rules run now (a rule's `rewrite` may not come back to them)

  def _rules(self, u: UOp, orig: UOp) -> UOp | None:
    self.steps += 1
    if self.steps > self.limit: raise RewriteLimit("rewrite did not reach a fixed point")
    if orig in self.running: raise RewriteLimit(f"a rule asked for the rewrite of {u.op}, whose own rules asked for it")
    self.running.add(orig)
    try: return self.rules.rewrite(u, self.ctx, self, orig)
    finally: self.running.discard(orig)

  def __call__(self, root: UOp) -> UOp:
    memo, enter, once, top_down = self.memo, self.enter, self.once, self.top_down
    stack: list = [(root, 0, None)]
    while stack:
      u, phase, extra = stack.pop()
      if phase == 0:
        if u in memo: continue
        if top_down and (r := self._rules(u, u)) is not None:
          if once: memo[u] = r
          else: stack += [(u, 2, r), (r, 0, None)]     # the hit is rewritten again
          continue
        stack.append((u, 1, None))
        for k in range(len(u.src) - 1, -1, -1):
          s = u.src[k]
          if s not in memo and (enter is None or enter(u, k)): stack.append((s, 0, None))
      elif phase == 1:
        if u in memo: continue
        if enter is None: new_src = tuple(memo[s] for s in u.src)
        else: new_src = tuple(memo[s] if enter(u, k) else s for k, s in enumerate(u.src))
        n = u if all(a is b for a, b in zip(new_src, u.src)) else u.replace(src=new_src)
        r = None if top_down else self._rules(n, u)
        if r is None:
          memo[u] = n
          if n is not u and not (once or top_down): memo[n] = n    # a fixed point (elsewhere n, met as it is, may still change)
        elif once: memo[u] = r
        else:
          stack.append((u, 2, r))
          if r not in memo: stack.append((r, 0, None))
      else:
        memo[u] = memo[extra]
    return memo[root]


def graph_rewrite(roots, rules: RuleSet, ctx=None, *, once: bool = False, top_down: bool = False,
                  enter: Callable[[UOp, int], bool] | None = None, limit: int = 10_000_000):
  """Rewrite the graphs under `roots` (a UOp or a list of them) with `rules` (module doc)."""
  rw = _Rewriter(rules, ctx, once, top_down, enter, limit)
  if isinstance(roots, UOp): return rw(roots)
  rl = list(roots)
  for r in rl: rw(r)
  return [rw.memo[r] for r in rl]


def _mapped(x: UOp, ctx: dict): return ctx.get(x)


SUBSTITUTE = RuleSet([Rule("substitute", Pat.var("x"), _mapped, traced=False)], "substitute")


def substitute(roots, mapping: dict, stop: Callable | None = None, enter: Callable[[UOp, int], bool] | None = None):
  """Replace nodes by mapping (UOp -> UOp) everywhere under roots, rebuilding consumers; a
  replacement is final (not entered). `stop(u)` true: keep u and do not enter it;
  `enter(u, k)` false: keep source k of u as it is."""
  if stop is None: return graph_rewrite(roots, SUBSTITUTE, mapping, top_down=True, once=True, enter=enter)
  inner = enter
  def entered(u: UOp, k: int) -> bool: return not stop(u) and (inner is None or inner(u, k))
  return graph_rewrite(roots, SUBSTITUTE, mapping, top_down=True, once=True, enter=entered)


def rebuild(root, fn: Callable, name: str | None = None):
  """Rebuild the graph under root bottom-up: each node gets its rebuilt sources, then fn(node)
  may return a replacement (None: keep it), once. Unlike substitute, replacements of nested
  nodes compose (the outer one is built on the inner one's result). The rule is named
  `name` (default: fn's name) in traces."""
  rule = Rule(name or fn.__name__, Pat.var("x"), lambda x: fn(x))
  return graph_rewrite(root, RuleSet([rule]), once=True)
