"""Stage `decide`: what the renderer prints but does not decide, written into each kernel's
LINEAR as node tags (the render stage's graph and `--dump-stages` show them):

  {"contract": "fused"}    an accumulator update acc + a*b + ... that the renderer writes as
                           fused multiply-adds (render.yaml `contract`: compiler/analysis/
                           contract.py proves no product or partial sum can overflow)
  {"contract": "guarded"}  an update only a launch-time scan of the buffers it reads proves:
                           fused in the kernel's fused variant only, which the kernel's Guard
                           (the updates returned beside the LINEAR) picks at each launch
  {"stream": true}         on a PARAM: an output at least render.yaml `streaming` big that the
                           kernel never reads, written with streaming stores

Tags with these keys that a kernel brings along are removed first: only this stage decides.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.frozen import thaw
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite
from tinyspec.props import props
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.analysis import contract as _contract
from tinyspec.compiler.analysis.parallel import WRITES
from tinyspec.compiler.render.nodes import DECISIONS, base_of, is_reg, numel, param_of, reads_acc, update_terms, value_uses


@dataclass
class Decisions:
  """A kernel's decisions: node (as the LINEAR has it) -> the keys its tag gets, and the
  updates its Guard checks (in LINEAR order)."""
  tags: dict = field(default_factory=dict)
  guard: list = field(default_factory=list)


def _contractions(instrs: list, d: Decisions, target: str, kind: str | None, bound: int, noalias: bool) -> None:
  """The updates that fuse (render.yaml `contract`): REDUCE(ADD) accumulator updates of a
  product, in kernels whose REG accumulators are all REDUCEs' summing at most `bound`
  elements (0: none)."""
  C = render_tables().get("contract") or {}
  if not bound or not C: return
  updates: dict = {}
  for u in instrs:
    if u.op == "STORE" and is_reg(u.src[0]) and u.src[1].op not in ("CONST", "VCONST"):   # updates, not initial values
      updates.setdefault(base_of(u.src[0]), []).append(u.src[1])
  acc_of = {v: b for b, vs in updates.items() for v in vs}
  writes = {t.arg["slot"] for u in instrs if u.op in WRITES and (t := param_of(u.src[0])).op == "PARAM"}
  # a buffer may be scanned at launch when the kernel never writes it, nor anything that may share its memory
  def scannable(slot: int) -> bool: return noalias and slot not in writes
  for u in instrs:
    if u.op not in C.get("reduce", ()) or props(u).dtype not in C.get("dtypes", ()) or u not in acc_of: continue
    terms = update_terms(u)
    cur = [t for t in terms if reads_acc(t, acc_of[u])]
    if len(cur) != 1 or not any(t.op == "MUL" for t in terms): continue
    up = _contract.update([t for t in terms if t is not cur[0]], props(u).dtype, bound, scannable)
    if up.cannot_overflow(): d.tags[u] = {"contract": "fused"}
    elif up.scans and kind in C[target].get("guard", ()):
      d.tags[u] = {"contract": "guarded"}
      d.guard.append(up)


def _streams(instrs: list, d: Decisions, target: str, stream_bytes: int | None) -> None:
  """The outputs written with streaming stores: written, never read here, at least stream_bytes big."""
  if render_tables().get("streaming", {}).get(target) is None or stream_bytes is None: return
  uses = value_uses(instrs)
  writes = {t for u in instrs if u.op in WRITES and (t := param_of(u.src[0])).op == "PARAM"}
  read = {param_of(u.src[0]) for u in instrs if u.op == "LOAD"} | {param_of(u) for u in instrs if u.op == "INDEX" and uses.get(u)}
  for p in instrs:
    if p.op == "PARAM" and p in writes and p not in read and len(p.src) != 3 and numel(props(p).shape) * _dt(props(p).dtype).itemsize >= stream_bytes:
      d.tags[p] = {"stream": True}


def retag(x: UOp, ctx: Decisions, orig: UOp):
  """A node gets the tag keys decided for it; decision keys it brought along go."""
  want = ctx.tags.get(orig, {})
  old = thaw(x.tag) if x.tag is not None else None
  if not want and not (isinstance(old, dict) and any(k in old for k in DECISIONS)): return None
  base = {k: v for k, v in old.items() if k not in DECISIONS} if isinstance(old, dict) else ({"tag": old} if old is not None else {})
  return x.replace(tag={**base, **want} or None)


DECIDE = RuleSet([Rule("retag", Pat.var("x"), retag)], "decide")


def decide(linear: UOp, target: str, kind: str | None, contract_bound: int, noalias: bool, stream_bytes: int | None) -> tuple[UOp, list]:
  """(the LINEAR with its decisions as tags, the updates of its Guard: empty when it has none)."""
  d = Decisions()
  instrs = list(linear.src)
  _contractions(instrs, d, target, kind, contract_bound, noalias)
  _streams(instrs, d, target, stream_bytes)
  return graph_rewrite(linear, DECIDE, d, once=True), d.guard
