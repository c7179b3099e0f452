"""docs/status.md: what is implemented where, computed from the tables, the code and the
corpus; never written by hand.

Columns per op: in the tables; example (valid / invalid / none); validator rules (the
op's checks, rules raised while deriving its properties, structural rules); derived
properties with an op-specific rule; reference evaluation (`refimpl.supported_ops()`);
compilation per target (`compiler.supported_ops(target)`); conformance cases
(conformance/cases/ files naming the op) and rule-corpus cases (conformance/rules/
*.expect.json files for the op's check rules).

"Conformance coverage per backend" renders docs/conformance-results.json when present:

  {"<backend>": {"<OP>": {"<dtype>": "passed" | "portable" | "failed" | "xfail" | "unsupported"}}}

(passed: the strict profile, the canonical results; portable: only the portable profile,
one of the allowed results). Each backend's line says which profile it meets.

It is an input like the tables: commit it together with the regenerated status.md.
"""
from __future__ import annotations
import importlib
import json
import sys
from pathlib import Path
from tinyspec.docgen import corpus, model as M

RESULTS_FILE = "docs/conformance-results.json"
STATUSES = {"passed": "pass", "portable": "port", "failed": "FAIL", "xfail": "xfail", "unsupported": "—"}
DEFAULT_TARGETS = ("c", "opencl")
_TARGET_TITLES = {"c": "C", "opencl": "OpenCL"}


def _warn(msg: str): print(f"gen_docs: {msg}", file=sys.stderr)


def supported(module: str, *args) -> dict[str, set] | None:
  """`module.supported_ops(*args)` as {op: set of levels}, or None when the module or the
  function does not exist (yet). Errors are reported, not hidden: a column of '—' in
  the committed status.md would then show up as a diff under --check."""
  try: mod = importlib.import_module(module)
  except ImportError as e:
    if getattr(e, "name", None) and not module.startswith(e.name): _warn(f"cannot import {module}: {e}")
    return None
  fn = getattr(mod, "supported_ops", None)
  if fn is None: return None
  try: res = fn(*args)
  except Exception as e:   # a broken plugin must not stop the docs; say so
    _warn(f"{module}.supported_ops{args!r} failed: {type(e).__name__}: {e}"); return None
  return {str(k): set(v) if not isinstance(v, str) else {v} for k, v in dict(res).items()}


def compiler_targets() -> tuple[str, ...]:
  try: mod = importlib.import_module("tinyspec.compiler")
  except ImportError: return DEFAULT_TARGETS
  t = getattr(mod, "TARGETS", None)
  return tuple(t) if t else DEFAULT_TARGETS


def _levels(T, lv: set | None) -> str:
  if lv is None: return "—"
  if not lv: return "no"
  order = list(T.levels)
  return " ".join(x[0].upper() for x in sorted(lv, key=lambda x: (order.index(x) if x in order else len(order), x)))


def _support_cell(T, sup: dict | None, name: str) -> str:
  """Levels an implementation handles the op at; '—' when it has no supported_ops()."""
  if sup is None: return "—"
  return _levels(T, sup.get(name, set()))


def _example_state(T, op) -> str:
  ex = M.example(T, op)
  if ex is None: return "none"
  return "invalid" if ex.errors else "valid"


def load_results(root: Path) -> tuple[dict | None, str]:
  """The results file (validated), or None with the reason it is absent or unusable."""
  p = Path(root) / RESULTS_FILE
  if not p.is_file(): return None, f"`{RESULTS_FILE}` is absent: no conformance results have been recorded yet."
  try: data = json.loads(p.read_text())
  except (OSError, ValueError) as e: return None, f"`{RESULTS_FILE}` cannot be read: {e}"
  ok = isinstance(data, dict) and all(isinstance(ops, dict) and all(isinstance(dts, dict) and all(s in STATUSES for s in dts.values())
                                                                      for dts in ops.values()) for ops in data.values())
  if not ok: return None, f"`{RESULTS_FILE}` does not have the form {{backend: {{op: {{dtype: status}}}}}} with statuses {', '.join(STATUSES)}."
  return data, ""


def _results_section(T, root: Path) -> list[str]:
  out = ["## Conformance coverage per backend", "",
         f"From `{RESULTS_FILE}`, of the form `{{backend: {{op: {{dtype: status}}}}}}` with status one of "
         + ", ".join(f"`{s}`" for s in STATUSES) + f" (shown as {', '.join(STATUSES.values())}; blank: not run).", ""]
  data, why = load_results(root)
  if data is None: return out + [why]
  dtype_order = [d["name"] for d in M.dtype_rows()]
  for backend in sorted(data):
    ops = data[backend]
    dts = sorted({dt for v in ops.values() for dt in v}, key=lambda d: (dtype_order.index(d) if d in dtype_order else len(dtype_order), d))
    names = [n for n in T.ops if n in ops] + sorted(n for n in ops if n not in T.ops)
    counts = {s: sum(1 for v in ops.values() for x in v.values() if x == s) for s in STATUSES}
    meets = ("meets **strict** (the canonical results) and portable" if not (counts["portable"] or counts["failed"] or counts["xfail"])
             else "meets **portable** (allowed results), not strict" if not (counts["failed"] or counts["xfail"])
             else "meets **portable** except the expected failures of its manifest" if not counts["failed"] else "meets **neither** profile")
    out += [f"### {backend}", "", ", ".join(f"{counts[s]} {s}" for s in STATUSES) + f". Profile: {meets}.", ""]
    out += ["| op | " + " | ".join(dts) + " |", "|" + "|".join(" --- " for _ in range(len(dts) + 1)) + "|"]
    out += [f"| {n} | " + " | ".join(STATUSES.get(ops[n].get(dt, ""), "") for dt in dts) + " |" for n in names]
    out.append("")
  return out[:-1]


def render_status_md(T, root: Path | str | None = None) -> str:
  """docs/status.md for the tables T and the code and corpus under root (the repository)."""
  root = Path(root) if root is not None else corpus.corpus_root()
  ref = supported("tinyspec.refimpl")
  targets = compiler_targets()
  comp = {t: supported("tinyspec.compiler", t) for t in targets}
  case_counts, n_case_files = corpus.case_ops(root)
  rule_cases = corpus.rule_case_files(root)
  names = list(T.ops) + sorted({n for s in [ref, *comp.values()] if s for n in s} - set(T.ops))
  head = ["op", "category", "tables", "example", "validator rules", "op-specific derived", "reference"] + \
         [_TARGET_TITLES.get(t, t) for t in targets] + ["cases", "rule cases"]
  rows, totals = [], {"ex": 0, "ref": 0, **{t: 0 for t in targets}, "cases": 0}
  for n in names:
    op = T.ops.get(n)
    impl = [_support_cell(T, ref, n)] + [_support_cell(T, comp[t], n) for t in targets]
    if op is None:
      rows.append([f"`{n}`", "—", "**no**", "—", "—", "—"] + impl + [str(case_counts.get(n, 0)), "—"])
      continue
    check_ids = M.check_rule_ids(op)
    cons = M.constraints(T, op)
    counts = [len(check_ids), sum(1 for c in cons if c.kind == "derived" and c.rule not in check_ids),
              sum(1 for c in cons if c.kind == "structural" and c.rule not in check_ids)]
    ex = _example_state(T, op)
    totals["ex"] += ex == "valid"
    totals["ref"] += bool(ref and ref.get(n))
    for t in targets: totals[t] += bool(comp[t] and comp[t].get(n))
    totals["cases"] += case_counts.get(n, 0) > 0
    n_rule = sum(len(rule_cases.get(rid, ())) for rid in check_ids)
    rows.append([f"[{n}](spec.md#op-{n.lower()})", op.category, "yes", ex, " + ".join(map(str, counts)),
                 ", ".join(M.op_specific_props(op)) or "—"] + impl +
                [str(case_counts.get(n, 0)), str(n_rule) if check_ids else "—"])
  n_ops = len(T.ops)
  level_key = ", ".join(f"{k[0].upper()} = {k}" for k in T.levels)
  out = ["# Implementation status", "",
         "> Generated by `tools/gen_docs.py` from the tables, the code and the corpus; do not edit by hand. "
         "`python tools/gen_docs.py --check` (run by CI) fails when this file is stale.", "",
         "## Summary", "",
         f"* ops in the tables: {n_ops}",
         f"* with a valid example graph: {totals['ex']} of {n_ops}",
         "* evaluated by the reference evaluator: " + (f"{totals['ref']} of {n_ops}" if ref is not None else "— (`refimpl.supported_ops()` does not exist yet)")]
  for t in targets:
    title = _TARGET_TITLES.get(t, t)
    out.append(f"* compiled to {title}: " + (f"{totals[t]} of {n_ops}" if comp[t] is not None else f"— (`compiler.supported_ops({t!r})` does not exist yet)"))
  out += [f"* with conformance cases: {totals['cases']} of {n_ops} (" + (f"{n_case_files} cases in `conformance/cases/`" if n_case_files else "no `conformance/cases/` files yet") + ")",
          f"* rule ids: {len(T.rule_ids())}; with an invalid and a valid case in `conformance/rules/`: "
          f"{sum(1 for r in T.rule_ids() if {c.valid for c in rule_cases.get(r, ())} == {True, False})}", "",
          "## Ops", "",
          "Columns: **tables**: the op is in `spec/ops.yaml` (rows marked **no** are implemented in code but missing from the "
          "tables); **example**: its `example:` graph validates; **validator rules**: its own checks + rules raised while "
          "deriving its properties + structural rules (see [spec.md](spec.md)); **op-specific derived**: properties with a "
          f"rule naming the op in `spec/derived.yaml`; **reference**, {', '.join('**' + _TARGET_TITLES.get(t, t) + '**' for t in targets)}: "
          f"levels handled ({level_key}; `—`: the function does not exist yet, `no`: not handled), from "
          "`refimpl.supported_ops()` and `compiler.supported_ops(target)`; **cases**: cases in `conformance/cases/` that stand for "
          "the op (a case folder's `covers`: the op and dtype it stands for; for a negative case, the ops of its graph); **rule cases**: cases in `conformance/rules/` (one per `*.expect.json`) for the op's own check rules.", ""]
  out += ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
  out += ["| " + " | ".join(r) + " |" for r in rows]
  out += [""] + _results_section(T, root)
  return "\n".join(out).rstrip() + "\n"
