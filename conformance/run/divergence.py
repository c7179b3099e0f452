"""The first divergent node of a failing case: where, in the case's graph, the backend's
values first leave the reference's.

Works for any backend through the protocol (conformance/run/protocol.py), without asking it
for anything new: the case's graph is *cut* at a candidate node (the nodes up to it, that
node the only root) and the cut graph is run like any other graph. The reference's value
of every node comes from one traced evaluation (refimpl `trace=True`). A node diverges
when the backend's value differs from the reference's beyond the node's own op bound
(compare.element_bounds, computed from the reference's operands).

The candidates are the ancestors of the differing outputs that compute something (not
inputs or constants), in topological order, whose cut graph validates (a kernel's
intermediate values are not roots; such cases have no candidates and are left alone).
The search bisects that order, which assumes that once a value diverges the later ones
on its path do too (the usual case; a value that diverges and is then masked or reduced
back into agreement can make the search land late). So it costs about log2(candidates)
runs, at most `max_runs`, and stops at `budget_s` seconds; what it found is then said with
how sure it is: whether every computed source of the node was seen to agree.
"""
from __future__ import annotations
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field, asdict
from pathlib import Path
import numpy as np
from tinyspec.graph import load_file, Graph
from tinyspec.validate import validate
from tinyspec.tables import tables
from tinyspec.dispatch import input_name
from tinyspec.conformance.run.compare import describe, element_bounds
from tinyspec.conformance.corpus.cases import from_disk, storage_dtype

MAX_RUNS = 16          # backend runs per case (bisection over 2**12 candidates, plus its sources)
BUDGET_S = 30.0        # seconds per case


@dataclass
class Divergence:
  node: int | None             # the node index, None when not found
  op: str = ""
  dtype: str = ""
  shape: tuple = ()
  detail: str = ""             # got/expected at its first differing elements
  sources_agree: bool | None = None   # every computed source seen to agree (None: not all run)
  runs: int = 0                # backend runs it took
  note: str = ""               # why nothing was found, or how sure the answer is
  output: bool = False         # the node is one of the graph's outputs (its values are the message's already)

  def line(self) -> str:
    """What a failure's message ends with."""
    if self.node is None: return f"first divergent node: not found ({self.note})"
    shape = "(" + ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"
    sure = {True: "its computed sources agree", False: "a source also differs", None: "its sources were not all checked"}[self.sources_agree]
    what = "the output itself" if self.output else self.detail
    return f"first divergent node: {self.node} {self.op} {self.dtype} {shape}: {what} ({sure}; {self.runs} run{'s' if self.runs != 1 else ''})"

  def to_json(self) -> dict:
    d = asdict(self)
    d["shape"] = list(self.shape)
    return d


@dataclass
class _Search:
  graph: object
  views: list
  trace: dict
  inputs: dict                 # name -> (path, dtype)
  run: object                  # (graph file, inputs) -> {output name: array} (raises on refusal)
  tmp: Path
  decomposed: bool = False
  profile: str = "strict"
  seen: dict = field(default_factory=dict)   # node -> message (None: agrees)
  runs: int = 0


def first_divergent(case, run, decomposed: bool = False, profile: str = "strict", max_runs: int = MAX_RUNS,
                    budget_s: float = BUDGET_S, message: str = "") -> Divergence:
  """The first node of `case` (a positive corpus case) whose value on the backend differs
  from the reference's. `run(graph_file, inputs)` runs a graph on the backend (inputs:
  name -> (path, dtype)) and returns its outputs. `message` is the failure's, whose
  `outN:` names pick the outputs to search from (all of them when it names none)."""
  from tinyspec.refimpl import evaluate  # noqa: PLC0415 (start-up time: the reference loads only when a case fails)
  g, diags = load_file(case.graph)
  if g is None or any(d.fatal for d in diags): return Divergence(None, note="the graph cannot be read")
  res = validate(g)
  if not res.ok: return Divergence(None, note="the graph does not validate")
  try: trace = evaluate(g, case.load_inputs(), trace=True).values
  except Exception as e: return Divergence(None, note=f"the reference cannot evaluate it ({type(e).__name__})")
  roots = g.root_indices
  named = {int(k) for k in re.findall(r"\bout(\d+):", message)}
  starts = [r for j, r in enumerate(roots) if j in named] or roots
  cands = _candidates(g, res, starts)
  if not cands: return Divergence(None, note="no node of it can be cut out as a root (a kernel-level graph?)")
  tmp = Path(tempfile.mkdtemp(prefix="tinyspec-divergence-"))
  try:
    s = _Search(g, res.views, trace, dict(case.inputs), run, tmp, decomposed, profile)
    return _bisect(s, cands, time.monotonic() + budget_s, max_runs)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def _candidates(g, res, starts) -> list[int]:
  """Ancestors of `starts` (not inside function bodies) that compute a value, sources first."""
  T = tables()
  seen, stack = set(), list(starts)
  while stack:
    i = stack.pop()
    if i in seen: continue
    seen.add(i)
    stack.extend(T.ops[g.nodes[i].op].open_src(g.nodes[i].src))
  return sorted(i for i in seen if _computed(g, res.views, i))


def _computed(g, views, i: int) -> bool:
  """Node i computes a value (a candidate): not a source (ops.yaml category), not void."""
  n = g.nodes[i]
  return bool(n.src) and tables().ops[n.op].category != "source" and _value(views[i])


def _value(view) -> bool:
  return view is not None and getattr(view, "dtype", None) not in (None, "void") and getattr(view, "shape", None) is not None


def _bisect(s: _Search, cands: list[int], deadline: float, max_runs: int) -> Divergence:
  lo, hi = 0, len(cands) - 1        # cands[hi] diverges (or is the last hope); cands[:lo] agree
  last = cands[hi]
  if _check(s, last) is None:       # the cut output agrees: the failure is not in a value (a dtype, a shape...)
    return _answer(s, None, "the differing output agrees when run on its own")
  while lo < hi and s.runs < max_runs and time.monotonic() < deadline:
    mid = (lo + hi) // 2
    verdict = _check(s, cands[mid])
    if verdict is _UNRUNNABLE: cands.pop(mid); hi -= 1; continue
    if verdict is None: lo = mid + 1
    else: hi = mid
  found = cands[hi]
  if lo < hi: return _answer(s, found, "stopped early (run or time budget): an earlier node may diverge too")
  return _answer(s, found, "", deadline, max_runs)


_UNRUNNABLE = object()


def _check(s: _Search, i: int):
  """None when node i agrees, a message when it differs, _UNRUNNABLE when it cannot be cut out."""
  if i in s.seen: return s.seen[i]
  cut = Graph(list(s.graph.nodes[:i + 1]), None, s.graph.level)
  if not validate(cut).ok: s.seen[i] = _UNRUNNABLE; return _UNRUNNABLE
  f = s.tmp / f"cut{i}.json"
  cut.save(f)
  inputs_of = tables().input_ops
  names = {input_name(n.op, n.arg) for n in cut.nodes if n.op in inputs_of and isinstance(n.arg, dict)}
  s.runs += 1
  try: got = s.run(f, {k: v for k, v in s.inputs.items() if k in names})
  except Exception as e: s.seen[i] = f"the backend refused the cut graph ({type(e).__name__}: {str(e)[:120]})"; return s.seen[i]
  view, node = s.views[i], s.graph.nodes[i]
  want = np.asarray(s.trace[i])
  out = next(iter(got.values()), None) if len(got) == 1 else got.get("out0")
  if out is None: s.seen[i] = "no output"; return s.seen[i]
  out = np.asarray(out)
  if out.dtype != storage_dtype(view.dtype): s.seen[i] = f"dtype {out.dtype}, expected {view.dtype}"; return s.seen[i]
  operands = [np.asarray(s.trace[j]) for j in node.src if j in s.trace]
  try: b = element_bounds(node.op, node.arg, view.dtype, operands, want, s.decomposed, s.profile)
  except Exception: b = 0.0
  s.seen[i] = describe(from_disk(out, view.dtype), want, view.dtype, b)
  return s.seen[i]


def _answer(s: _Search, i: int | None, note: str, deadline: float | None = None, max_runs: int = 0) -> Divergence:
  if i is None: return Divergence(None, runs=s.runs, note=note)
  node, view = s.graph.nodes[i], s.views[i]
  srcs = [j for j in node.src if _computed(s.graph, s.views, j)]
  agree: bool | None = True
  for j in srcs:   # confirm: the node's computed sources agree (most were seen by the bisection already)
    if j not in s.seen and (deadline is None or s.runs >= max_runs or time.monotonic() > deadline): agree = None; continue
    v = _check(s, j)
    if v is _UNRUNNABLE: agree = None if agree else agree
    elif v is not None: agree = False
  detail = s.seen.get(i) or ""
  return Divergence(i, node.op, str(view.dtype), tuple(int(d) for d in view.shape), detail, agree, s.runs, note,
                    i in s.graph.root_indices)
