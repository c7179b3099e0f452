"""What a stage is made of: steps, each a rule set applied to a kernel with its context.

A `Step` builds its context from the kernel (`context(sink, env)`; None: the step has
nothing to do and leaves the kernel as it is) and rewrites the kernel with its rules
through the core's engine (tinyspec/rewrite.py): to a fixed point, or once per node
(`once`), or top-down. `simplify_after` simplifies what the rules changed. A stage runs
its steps in order (`run_steps`); checks that only refuse a kernel are plain functions
among them.

A schedule stage's rules take one kernel to the kernels that replace it (`KernelRule`,
`rewrite_schedule`): a kernel split in two, a copy kernel put before it; what changes
inside a kernel changes through the engine. Their context (`ScheduleContext`) hands out
the new intermediate buffers.

`Rounds` is the context of rules that rewrite nested nodes innermost first and several
at once (the reductions that share one loop, the group reductions that share one buffer
and BARRIER): one bottom-up rewrite visits each node once, and `Rounds` says which nodes
belong together and in which order their groups are built, so that what a group hands
out (buffer slots, range ids) follows the rounds.
"""
from __future__ import annotations
from dataclasses import dataclass
from typing import Callable
from tinyspec.uop import UOp, toposort
from tinyspec.rewrite import RuleSet, graph_rewrite, note
from tinyspec.compiler.literals import shape_operand
from tinyspec.compiler.schedule import Kernel, Schedule
from tinyspec.compiler.analysis.symbolic import simplify


@dataclass(frozen=True)
class Env:
  """What a stage's rules may ask of the compile: the target, its device, and whether GPU
  group reductions combine as a tree (render.yaml heuristics `group_combine`)."""
  target: str
  dev: object = None
  tree: bool = False


@dataclass(frozen=True)
class Step:
  name: str
  rules: RuleSet
  context: Callable | None = None
  once: bool = False
  top_down: bool = False
  simplify_after: bool = False

  def __call__(self, sink: UOp, env=None) -> UOp:
    ctx = env
    if self.context is not None:
      ctx = self.context(sink, env)
      if ctx is None: return sink
    out = graph_rewrite(sink, self.rules, ctx, once=self.once, top_down=self.top_down)
    return simplify(out) if self.simplify_after and out is not sink else out


def run_steps(sink: UOp, steps, env=None) -> UOp:
  """The steps in order (a step is a Step or a check: sink, env -> sink)."""
  for step in steps: sink = step(sink, env)
  return sink


@dataclass(frozen=True)
class KernelRule:
  """A schedule rule: fn(kernel, ctx) -> the kernels that replace it, or None (it stays)."""
  name: str
  fn: Callable


class ScheduleContext:
  """What schedule rules share: the environment (target, device...), the intermediate
  buffers (new ones get the next free slots)."""

  def __init__(self, sched: Schedule, env):
    self.sched, self.env = sched, env
    self.intermediates = set(sched.intermediates)
    self.slot = sched.free_slot()

  def buffer(self, shape, dtype: str, device) -> UOp:
    """A new intermediate BUFFER."""
    b = UOp("BUFFER", (shape_operand(shape),), {"slot": self.slot, "dtype": dtype, "device": device})
    self.slot += 1
    self.intermediates.add(b)
    return b


def rewrite_schedule(sched: Schedule, rules, env=None) -> Schedule:
  """Each kernel in order through `rules` (the first that returns kernels replaces it);
  the schedule itself when no rule fired."""
  ctx = ScheduleContext(sched, env)
  out: list[Kernel] = []
  fired = False
  for k in sched.kernels:
    for rule in rules:
      new = rule.fn(k, ctx)
      if new is not None:
        note(rule.name, "KERNEL")
        out += new
        fired = True
        break
    else: out.append(k)
  return Schedule(out, sched.outputs, ctx.intermediates, dict(sched.meta)) if fired else sched


class Rounds:
  """The nodes `pick` selects, in the rounds innermost-first rewriting takes them: round 1
  holds those with no picked node below them, round n those whose picked nodes below are
  all in earlier rounds; within a round they are grouped by `key`, groups and members in
  kernel order. `result(node, build)` is node's replacement: `build(members)` makes its
  group's (a dict member -> replacement) the first time one is asked for, after building
  every group before it (earlier rounds, then earlier in kernel order)."""

  def __init__(self, sink: UOp, pick: Callable[[UOp], bool], key: Callable[[UOp], object]):
    depth: dict[UOp, int] = {}
    rounds: dict[int, dict] = {}
    for u in toposort(sink):
      d = max((depth[s] for s in u.src), default=0)
      if pick(u):
        d += 1
        rounds.setdefault(d, {}).setdefault(key(u), []).append(u)
      depth[u] = d
    self.groups: list[tuple[int, list[UOp]]] = [(n, members) for n in sorted(rounds) for members in rounds[n].values()]
    self.group_of = {m: i for i, (_, members) in enumerate(self.groups) for m in members}
    self.done: dict[UOp, UOp] = {}
    self.built = 0

  def __bool__(self) -> bool: return bool(self.groups)

  def result(self, node: UOp, build: Callable[[int, list], dict]) -> UOp:
    i = self.group_of[node]
    while self.built <= i:
      n, members = self.groups[self.built]
      self.done.update(build(n, members))
      self.built += 1
    return self.done[node]
