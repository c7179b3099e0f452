"""Sorting what `tinyspec fuzz --backend tinygrad` finds: an entry of the tinygrad ledger
(docs/tinygrad-bugs.md; matched by a signature of interop/tinygrad_bugs.yaml: op or Tensor
method, dtype, device, kind of difference, inputs), a limit of tinyspec's own tinygrad adapter
(reported as unsupported, never as a failure), or new. A ledger entry has a class: a bug by
tinygrad's own intent, a divergence tinygrad's source or maintainers acknowledge, or an
undefined input; only the first counts as a tinygrad bug (Verdict.ledger_class). For
each (with an output folder) a standalone tinygrad-only repro.py is written (interop/repro.py),
shrunk to the failing op on the values tinygrad gave it where that still fails, and kept
only once it has failed on tinygrad the same way when run with plain python.

    v = triage(failure, out, device)   # Verdict(kind, bug, why, repro, facts)

The tinygrad backend's `triage` method calls this (conformance/fuzz/driver.py asks every
backend that has one).
"""
from __future__ import annotations
import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
import numpy as np
import yaml
from tinyspec.dispatch import input_name
from tinyspec.dtypes import DTYPES
from tinyspec.validate import validate
from tinyspec.conformance.run.compare import mismatches
from tinyspec.files import make_dir, write_file
from tinyspec.interop.repro import NoRepro, reproduces, Check, repro_source
from tinyspec.tables import tables
from tinyspec.graph import Graph, Node
from tinyspec.frozen import thaw

BUGS_PATH = Path(__file__).with_name("tinygrad_bugs.yaml")


CLASSES = ("bug", "divergence", "undefined")   # the ledger's classes (a), (b), (c)


@dataclass
class Verdict:
  kind: str                          # documented (in the ledger), unsupported, new, tinyspec (a failure of tinyspec's own checks)
  bug: str | None = None             # the ledger entry's id
  why: str = ""                      # unsupported: what the adapter lacks; new: what was found
  repro: Path | None = None          # new: the repro that failed on tinygrad
  note: str = ""                     # new without a repro: why none was kept
  facts: dict = field(default_factory=dict)   # what the signatures were matched against

  @property
  def key(self) -> tuple:
    """What makes two new findings the same bug: op (or Tensor method), dtype class, device,
    kind of difference."""
    f = self.facts
    return (tuple(sorted(set(f.get("ops", ())) | set(f.get("api", ())))), tuple(sorted(f.get("classes", ()))), f.get("device"), f.get("kind"))

  @property
  def ledger_class(self) -> str | None:
    """bug, divergence or undefined for a finding the ledger holds; None otherwise."""
    return entry_class(self.bug) if self.kind == "documented" and self.bug is not None else None

  @property
  def label(self) -> str:
    """How a report names it: `bug X`, `divergence X`, `undefined X`, or the kind."""
    return f"{self.ledger_class} {self.bug}" if self.ledger_class else self.kind


@lru_cache(maxsize=None)
def ledger() -> dict:
  """entry id -> {class, signatures} (interop/tinygrad_bugs.yaml)."""
  return yaml.safe_load(BUGS_PATH.read_text())["entries"]


def signatures() -> dict:
  """entry id -> [signature dicts], every class."""
  return {k: e["signatures"] for k, e in ledger().items()}


def entry_class(entry: str) -> str:
  """The ledger class of an entry: bug (a), divergence (b) or undefined (c)."""
  return ledger()[entry]["class"]


def class_counts(known: dict) -> dict:
  """{class: {entry: findings}} of a campaign's or a fuzz's documented findings."""
  out: dict = {}
  for bug, n in sorted(known.items()):
    out.setdefault(entry_class(bug) if bug in ledger() else "bug", {})[bug] = n
  return out


# ------------------------------------------------------------------ facts of a finding
def difference_kind(got, want, dt: str, bad) -> str:
  """The kind of difference at the first element of `bad`."""
  if DTYPES[dt].cls != "float": return "value"
  i = tuple(int(x) for x in np.argwhere(np.asarray(bad))[0]) if np.asarray(bad).ndim else ()
  g, w = float(np.asarray(got)[i]), float(np.asarray(want)[i])
  if np.isnan(w) and not np.isnan(g): return "not-nan"
  if np.isnan(g): return "nan"
  if np.isinf(g) and not np.isinf(w): return "overflow"
  if g == -w and (np.isinf(w) or w == 0): return "sign"
  if g == 0 and w != 0 and abs(w) < DTYPES[dt].normal_range[0]: return "flush"
  return "ulp"


def facts_of(f, device: str) -> dict:
  """What a finding is matched by: kind, ops, dtypes, classes, sources, device, message."""
  d = f.case()
  views = validate(d.graph).views
  out = {"device": device, "message": f.message}
  if f.prop == "values" and f.detail is not None:
    det = f.detail
    bad = mismatches(det["got"], det["want"], f.dtype, det["bounds"], det["alternatives"])
    g = f.drawn.graph
    srcs = [j for j in g.nodes[f.node].src if isinstance(getattr(validate(g).views[j], "dtype", None), str)] if f.node < len(g.nodes) else []
    first = next((np.asarray(v).dtype.name for v in det["operands"]), None)
    out.update(kind=difference_kind(det["got"], det["want"], f.dtype, bad) if bad.any() else "ulp",
               ops={f.op}, dtypes={x for x in (f.dtype, first) if x}, result={f.dtype}, operand={first} if first else set(),
               sources={g.nodes[j].op for j in srcs}, inputs=_operand_classes(det["operands"], det["want"], bad))
  else:
    dts = {v.dtype for v in views if isinstance(getattr(v, "dtype", None), str) and v.dtype != "void"}
    out.update(kind=run_kind(f.message), ops={n.op for n in d.graph.nodes}, dtypes=dts, result=dts, operand=dts, sources=set(), inputs=set())
  out["classes"] = {DTYPES[x].cls for x in out["dtypes"] if x in DTYPES}
  return out


def value_classes(values, dtype) -> set:
  """What kinds of values these are (the `inputs` of a signature): nan, inf, -inf, zero,
  subnormal, huge (|x| from 1e15, or half the dtype's largest), int-min, int-max, finite."""
  dt = np.dtype(dtype)
  out = set()
  for v in np.asarray(values).reshape(-1).tolist():
    if dt.kind == "f":
      v = float(v)
      out.add("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf") if np.isinf(v) else "zero" if v == 0
              else "subnormal" if abs(v) < np.finfo(dt).tiny else "huge" if abs(v) >= min(1e15, float(np.finfo(dt).max) / 2) else "finite")
    elif dt.kind in "iu":
      out.add("int-min" if dt.kind == "i" and v == np.iinfo(dt).min else "int-max" if v == np.iinfo(dt).max else "finite")
  return out


def _operand_classes(operands, want, bad) -> set:
  """The value classes of the first differing element's operands (each broadcast to want's shape)."""
  bad, want = np.asarray(bad), np.asarray(want)
  if not bad.any() or want.shape != bad.shape: return set()
  i = tuple(int(x) for x in np.argwhere(bad)[0])
  out = set()
  for a in operands:
    a = np.asarray(a)
    if a.dtype.kind not in "fiu": continue
    try: out |= value_classes(np.broadcast_to(a, want.shape)[i], a.dtype)
    except ValueError: continue   # an operand of another shape (a reduce's source): no element to name
  return out


def run_kind(message: str) -> str:
  """signal:NAME for a backend that died, error:TYPE for an exception it answered with."""
  m = re.search(r"killed by (SIG[A-Z]+)", message)
  if m: return f"signal:{m.group(1)}"
  m = re.search(r"failed: ([A-Za-z_][A-Za-z0-9_.]*): ", message) or re.match(r"([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception)): ", message)
  if m: return f"error:{m.group(1).rsplit('.', 1)[-1]}"
  if "timed out" in message or "hung" in message: return "hang"
  return "error"


def matches(sig: dict, facts: dict) -> bool:
  """Whether a signature (interop/tinygrad_bugs.yaml, whose header says what each key means) matches."""
  def with_classes(names): return set(names) | {DTYPES[x].cls for x in names if x in DTYPES}
  kinds = sig.get("kind")
  if kinds is not None and facts["kind"] not in (kinds if isinstance(kinds, list) else [kinds]): return False
  if "ops" in sig and not facts["ops"] & set(sig["ops"]): return False
  if "api" in sig and not facts.get("api", set()) & set(sig["api"]): return False
  if "inputs" in sig and not facts.get("inputs", set()) & set(sig["inputs"]): return False
  for key, fact in (("dtypes", "dtypes"), ("result", "result"), ("operand", "operand")):
    if key in sig and not with_classes(facts[fact]) & set(sig[key]): return False
  if "sources" in sig and not any({g} <= facts["sources"] if isinstance(g, str) else set(g) <= facts["sources"] for g in sig["sources"]): return False
  if "devices" in sig and facts["device"] not in sig["devices"]: return False
  if "message" in sig and not re.search(sig["message"], facts["message"]): return False
  return True


def documented(facts: dict) -> str | None:
  """The id of the documented bug whose signature matches (the most specific one: the
  matching signature with the most keys), or None."""
  def specificity(sig):   # its keys, a source group of several ops counting each
    groups = [g for g in sig.get("sources", ()) if not isinstance(g, str)]
    return len(sig) + max([len(g) - 1 for g in groups], default=0)
  hits = [(specificity(s), bug) for bug, sigs in signatures().items() for s in sigs if matches(s, facts)]
  return max(hits, key=lambda h: h[0])[1] if hits else None


# ------------------------------------------------------------------ the verdict
def triage(f, out: Path | None, device: str, kernel_uops=None) -> Verdict | None:
  """The verdict on a fuzz failure (conformance/fuzz/checks.Failure) found on `device`;
  None for a failure that is not tinygrad's (the validator's, the reference's, min_max).
  kernel_uops: the backend's kernel builder, for kernel-level repros."""
  if f.prop not in ("values", "run"): return None
  facts = facts_of(f, device)
  if f.prop == "run" and "[backend.unsupported]" in f.message:   # the adapter's limit (normally refused before this)
    return Verdict("unsupported", why=f.message.split(": ", 2)[-1][:160], facts=facts)
  if "the graph is invalid" in f.message:   # the per-node check built a graph the validator refuses: tinyspec's, never tinygrad's
    return Verdict("tinyspec", why=f.message[:300], facts=facts)
  bug = documented(facts)
  v = Verdict("documented", bug, facts=facts) if bug is not None else Verdict("new", why=str(f), facts=facts)
  if out is None: v.note = "no --out: no repro written"; return v
  v.repro, v.note = keep_repro(f, facts, Path(out), device, kernel_uops)   # a documented bug's too: the finding's own repro
  return v


def keep_repro(f, facts: dict, out: Path, device: str, kernel_uops=None) -> tuple[Path | None, str]:
  """Write repro.py for f under out/repros/NAME/ and run it: (its path, "") when it fails on
  tinygrad as the finding did, else (None, why not). The smallest that fails is kept: the
  failing op alone on the values tinygrad gave it (one element where the op is
  elementwise), then the whole minimal graph."""
  expect = "value" if f.prop == "values" else facts["kind"]
  h = hashlib.sha256(f.case().graph.dumps().encode()).hexdigest()[:8]
  name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{f.op or 'graph'}-{f.dtype or 'any'}-{facts['kind']}-{device}-{h}")
  folder = make_dir(out / "repros" / name)
  why = []
  for title, make in _candidates(f, device, kernel_uops):
    try: src = make()
    except NoRepro as e: why.append(f"{title}: {e}"); continue
    path = folder / "repro.py"
    write_file(path, src)
    ok, output = reproduces(path, device, expect)
    if ok: return path, ""
    why.append(f"{title}: does not fail on tinygrad ({output.strip().splitlines()[-1][:160] if output.strip() else 'no output'})")
  (folder / "repro.py").unlink(missing_ok=True)
  write_file(folder / "not-reproduced.txt", "\n".join([str(f), *why]) + "\n")
  return None, "; ".join(why)


def _candidates(f, device: str, ku):
  """(title, a function making a repro's source) in the order tried."""
  d = f.case()
  title = f"{f} (device {device})"
  if f.prop == "values" and f.detail is not None:
    det = f.detail
    yield "the op alone", lambda: _op_alone(f, device, title, ku)
    check = Check(f.dtype, np.asarray(det["want"]), det["bounds"], list(det["alternatives"]))
    yield "the minimal graph", lambda: repro_source(d.graph, d.inputs, _output_of(d, f.node), device, check, title, "its check fails", ku)
  else:
    for k in range(len(d.outputs)):
      yield f"output {k} of the minimal graph", (lambda k=k: repro_source(d.graph, d.inputs, _output_name(d, k), device, None, title, facts_kind(f), ku))


def facts_kind(f) -> str:
  return f"tinygrad {run_kind(f.message).replace(':', ' ')}"


def _output_name(d, k: int) -> str:
  """The k-th output of a drawn case: out{k} at tensor level, the PARAM's input name in a kernel."""
  return sorted(d.outputs, key=lambda n: d.outputs[n])[k]


def _output_of(d, node: int) -> str:
  """The failing node's output name in its minimal case (Drawn.minimal: the node is the last one kept)."""
  return max(d.outputs, key=d.outputs.get)


def _op_alone(f, device: str, title: str, ku) -> str:
  """The failing op on the values tinygrad gave its sources (conformance/fuzz/localcheck.py
  local_graph), cut to the first failing element where every value is elementwise."""
  from tinyspec.conformance.fuzz.localcheck import local_graph  # noqa: PLC0415 (hypothesis, a test extra, and the reference: only a finding's repro needs them)
  det = f.detail
  d = f.drawn
  views = validate(d.graph).views
  g, inputs, _, out = local_graph(d, views, f.node, det["sources"])
  want, bounds, alts = np.asarray(det["want"]), det["bounds"], [np.asarray(a) for a in det["alternatives"]]
  bad = mismatches(det["got"], want, f.dtype, bounds, alts)
  if not np.asarray(bad).any(): raise NoRepro("no element differs")
  if g.level == "tensor" and want.ndim and _elementwise_only(g):
    pos = tuple(int(x) for x in np.argwhere(np.asarray(bad))[0])
    g, inputs = _at(g, inputs, pos, want.shape)
    pick = lambda a: np.asarray(np.broadcast_to(np.asarray(a), want.shape)[pos]).reshape((1,) * want.ndim)
    want, bounds, alts = pick(want), pick(np.broadcast_to(np.asarray(bounds, np.float64), want.shape)), [pick(a) for a in alts]
  return repro_source(g, inputs, out, device, Check(f.dtype, want, bounds, alts), title, "its check fails", ku)


def _elementwise_only(g) -> bool:
  T = tables()
  return all(n.op in T.alu_ops or T.ops[n.op].category == "source" for n in g.nodes)


def _at(g, inputs: dict, pos: tuple, shape: tuple):
  """The one-node tensor graph on the elements at `pos` (inputs broadcast to shape first):
  every BUFFER holds one element, its dims all 1."""
  nodes, ins, new = [], {}, {}
  for i, n in enumerate(g.nodes):
    if n.op == "BUFFER":
      name = input_name(n.op, n.arg)
      ins[name] = np.ascontiguousarray(np.broadcast_to(np.asarray(inputs[name]), shape)[pos].reshape((1,) * len(shape)))
      nodes.append(Node("VCONST", [], {"values": [1] * len(shape), "dtype": "index"}))
      nodes.append(Node("BUFFER", [len(nodes) - 1], thaw(n.arg)))
    else:
      nodes.append(Node(n.op, [new[j] for j in n.src], thaw(n.arg)))
    new[i] = len(nodes) - 1
  return Graph(nodes, None, g.level), ins
