"""`tinyspec conformance` and `tinyspec fuzz`.

  tinyspec conformance                                  # the rule corpus through tinyspec's validator
  tinyspec conformance --backend c [--cases DIR] [-k PATTERN] [--junit FILE] [--json FILE]
                       [--workers N] [--timeout S] [--batch N] [--manifest FILE] [--progress]
                       [--coverage docs/conformance-results.json]
  tinyspec fuzz --backend c --examples N [--seed S] [--out DIR]
  tinyspec fuzz --backend c --sanitize --examples N [--seed S] [--out DIR] [--families F,...]

Prints the failures (every case with -v) and the line `N passed, N failed, ...`. Exit 0
when there is no unexpected result (no failure, error or unexpected pass), 1 when there
is, 2 for bad usage, an unknown or unavailable backend, or a corpus that cannot be read.
"""
from __future__ import annotations
import json
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.deadline import sigterm_raises, Terminated
from tinyspec.files import FileRefused, printable, write_file


def _err(msg: str) -> int:
  print(printable(f"tinyspec conformance: {msg}"), file=sys.stderr)
  return EXIT_UNREADABLE


def _is_rule_corpus(d: Path | None) -> bool:
  from tinyspec.conformance.rulecases import RULES_DIR, EXPECT_SUFFIX
  if d is None: return False
  d = Path(d)
  return d.resolve() == RULES_DIR.resolve() or (d.is_dir() and next(d.rglob("*" + EXPECT_SUFFIX), None) is not None
                                                 and next(d.rglob("case.json"), None) is None)


def conformance_command(sub):
  from tinyspec.conformance import runner
  p = sub.add_parser("conformance", help="run the conformance suite",
                     description="Run the conformance cases through backends. Without --backend: the rule corpus "
                                 "(conformance/rules) through tinyspec's validator. With --backend NAME (ref, c, opencl, any "
                                 "registered one, cmd:COMMAND or the path of an executable speaking the protocol of "
                                 "conformance/protocol.py): the case corpus (conformance/cases). Exit 0 when there is no "
                                 "unexpected result, 1 when there is, 2 for bad usage or an unreadable corpus.")
  p.add_argument("--cases", metavar="DIR", type=Path, default=None, help="the case folder (default: conformance/cases, or conformance/rules for the validator)")
  p.add_argument("-k", dest="patterns", metavar="PATTERN", action="append",
                 help="run only cases whose id contains PATTERN (or matches it as a glob); 'not PATTERN' leaves those out; "
                      "repeat to narrow further")
  p.add_argument("--backend", dest="backends", metavar="NAME", action="append",
                 help=f"backend to run (repeatable; default: {', '.join(runner.DEFAULT_BACKENDS)})")
  p.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE")
  p.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML to FILE")
  p.add_argument("--html", metavar="DIR", help="also write a report to DIR/index.html: an op x dtype matrix by result, "
                                               "and per failure its graph, inputs, differing elements and repro command")
  p.add_argument("--workers", type=int, default=1, metavar="N", help="backend processes run side by side (default 1)")
  p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds one case may take before it fails as a hang (default 60)")
  p.add_argument("--batch", type=int, default=None, metavar="N", help="merge up to N tensor-level cases into one run (default: the backend's own, 1 for external ones)")
  p.add_argument("--manifest", metavar="FILE", type=Path, help="expected failures (default conformance/manifests/<backend>.yaml, or <backend>-<variant>.yaml where the backend names one)")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="judge by the canonical results (strict) or any allowed one (portable); default: the profile the backend claims")
  p.add_argument("--coverage", metavar="FILE", type=Path, help="merge the op x dtype coverage into FILE (e.g. docs/conformance-results.json)")
  p.add_argument("--divergence", type=int, default=20, metavar="N",
                 help="search the first divergent node of up to N failing cases (by running the graph cut at its nodes; "
                      "about log2(nodes) runs each, at most 16 or 30 s); 0: none (default 20)")
  p.add_argument("--progress", action="store_true", help="report progress on stderr even when it is not a terminal")
  p.add_argument("-v", "--verbose", action="store_true", help="print every case, not only failures")
  p.add_argument("--list", action="store_true", help="list the selected cases and exit")
  p.add_argument("--no-verify", dest="verify", action="store_false",
                 help="run cases whose files do not match their sha256 pin (default: such a case is an error, rule case.pin)")

  def show(a, r):
    if r.status in ("pass", "skip", "unsupported", "xfail") and not a.verbose: return
    line = f"{r.status.upper():5s} {r.backend} {r.case}"
    print(printable(line + (f": {r.message}" if r.message else "")), flush=True)   # ids and messages come from files and backends

  def run(a) -> int:
    names = a.backends or list(runner.DEFAULT_BACKENDS)
    judges = [n for n in names if n in runner.BACKENDS]
    execs = [n for n in names if n not in runner.BACKENDS]
    if judges and execs: return _err("judges of the rule corpus (validator) and executing backends run separately")
    if judges or (not execs and _is_rule_corpus(a.cases)):
      return _run_judges(a, judges or list(runner.DEFAULT_BACKENDS), show)
    return _run_execs(a, execs, show)
  return p, run


def _run_judges(a, names, show) -> int:
  from tinyspec.conformance import runner
  from tinyspec.conformance.rulecases import CorpusError
  try:
    cases = runner.select(runner.load_cases(a.cases), a.patterns)
  except CorpusError as e:
    return _err(str(e))
  if not cases: return _err("no case matches" + (f" {' and '.join(a.patterns)}" if a.patterns else ""))
  if a.list:
    for c in cases: print(printable(c.id))
    return EXIT_OK
  backends = [runner.BACKENDS[n]() for n in names]
  results = runner.run(cases, backends, lambda r: show(a, r))
  return _finish(a, results, names, str(a.cases or "conformance/rules"))


def _run_sanitized(a) -> int:
  from tinyspec.conformance import sanitize, hostile
  if a.backend != "c":
    print("tinyspec fuzz: --sanitize builds C kernels: use --backend c", file=sys.stderr); return EXIT_UNREADABLE
  families = a.families.split(",") if a.families else list(hostile.FAMILIES)
  bad = [f for f in families if f not in hostile.FAMILIES]
  if bad:
    print(f"tinyspec fuzz: unknown families {', '.join(bad)} (known: {', '.join(hostile.FAMILIES)})", file=sys.stderr); return EXIT_UNREADABLE
  why = sanitize.unavailable()
  if why:
    print(f"tinyspec fuzz: {why}", file=sys.stderr); return EXIT_UNREADABLE
  rep = sanitize.fuzz_sanitized(a.examples, a.seed, a.out, families, log=lambda m: print(m, flush=True), timeout=a.timeout)
  for w in rep.written: print(f"wrote {w}")
  why = rep.refused.pop("why", {})
  if rep.refused:
    print("refused (documented limitations, not failures): " + ", ".join(f"{k} {v}" for k, v in sorted(rep.refused.items())))
    for k, v in sorted(why.items()): print(f"  {k}, e.g.: {v}")
  print("examples per family: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.drawn.items())))
  print(f"{rep.examples} examples, {len(rep.failures)} failures, {rep.seconds:.1f} s (backend c, sanitized: ASan+UBSan, TSan; seed {a.seed})")
  return EXIT_OK if not rep.failures else EXIT_INVALID


def _run_execs(a, names, show) -> int:
  from tinyspec.conformance import runner
  from tinyspec.conformance.corpus import load_cases, CaseError
  broken: list = []
  try: cases = runner.select(load_cases(a.cases, broken), a.patterns)
  except CaseError as e: return _err(str(e))
  broken = [(cid, msg) for cid, msg in broken if runner.select([_Named(cid)], a.patterns)]
  if not cases and not broken: return _err("no case matches" + (f" {' and '.join(a.patterns)}" if a.patterns else ""))
  if a.list:
    for c in cases: print(printable(c.id))
    return EXIT_OK
  if a.workers < 1: return _err("--workers must be at least 1")
  if not a.timeout > 0: return _err("--timeout must be a positive number of seconds")
  # a malformed case folder is that case's error; the others run
  results = [runner.Result(cid, name, "error", msg) for cid, msg in broken for name in names]
  for r in results: show(a, r)
  with sigterm_raises():
    try:
      return _run_each(a, names, cases, show, results)
    except (KeyboardInterrupt, Terminated) as e:
      return _interrupted(a, e, results, names, cases)


class _Named:
  def __init__(self, cid): self.id = cid


def _interrupted(a, e, results, names, cases) -> int:
  """After SIGINT or SIGTERM: the backends are dead (their process groups killed); say what
  ran, write the reports of it, exit 130 or 143."""
  from tinyspec.deadline import kill_children
  kill_children()
  code = getattr(e, "exit_code", 130)
  sys.stdout.flush()
  print(f"\ninterrupted by {'SIGTERM' if code == 143 else 'SIGINT'}: {len(results)} of {len(cases) * len(names)} results", file=sys.stderr)
  _finish(a, results, names, str(a.cases or "conformance/cases"), cases)
  return code


def _run_each(a, names, cases, show, results) -> int:
  from tinyspec.conformance import runner
  from tinyspec.conformance.corpus import load_cases
  from tinyspec.conformance.execute import CaseRunner, BackendUnavailable, coverage
  from tinyspec.conformance.manifest import load_manifest, ManifestError
  from tinyspec.conformance.report import Progress, merge_coverage
  for name in names:
    try:
      r = CaseRunner(name, workers=a.workers, timeout=a.timeout, batch=a.batch, verify=a.verify, profile=a.profile,
                     divergence=a.divergence)
      r.capabilities()
      r.manifest = load_manifest(r.manifest_name, a.manifest)
    except (KeyError, ManifestError, BackendUnavailable) as e:
      return _err(str(e).strip('"'))
    bar = Progress(len(cases), r.name, True if a.progress else None)
    def on(res, bar=bar):
      bar.update(res)
      if res.status in ("fail", "error", "xpass") or a.verbose:
        if bar.on and bar.tty: sys.stderr.write("\r\033[K"); sys.stderr.flush()
        show(a, res)
    r.on_result = on
    try: res = r.run(cases)
    except BaseException:
      bar.close()
      results += r.results.values()   # what finished before the interruption
      raise
    bar.close()
    results += res
    print(printable(f"{r.name}: {runner.profile_line(res)} (judged by {r.profile})"))
    if a.coverage:
      try: merge_coverage(a.coverage, r.name, coverage(cases, res))
      except FileRefused as e: return _err(f"{e}")
    stale = r.manifest.unused([c.id for c in load_cases(a.cases, [])])
    if stale: print(printable(f"note: {r.name}'s manifest has entries matching no case: {', '.join(stale)}"), file=sys.stderr)
  return _finish(a, results, [n for n in names], str(a.cases or "conformance/cases"), cases)


def _finish(a, results, names, cases_dir, cases=()) -> int:
  from tinyspec.conformance import runner
  from tinyspec.conformance.report import junit_xml
  c = runner.counts(results)
  print(runner.summary_line(c))
  try:
    if a.json: write_file(a.json, json.dumps(runner.report_json(results, names, cases_dir, getattr(a, "profile", None)), indent=1) + "\n")
    if a.junit: write_file(a.junit, junit_xml(results, "tinyspec conformance"))
    if getattr(a, "html", None):
      from tinyspec.conformance import htmlreport
      print(f"wrote {htmlreport.write(a.html, results, {c.id: c for c in cases})}")
  except FileRefused as e:
    return _err(f"{e}")
  return EXIT_OK if runner.ok(c) else EXIT_INVALID


def run_command(sub):
  """`tinyspec run` (compiler/cli.py) with every backend: the ones it does not run itself
  go through the protocol in their own process."""
  from tinyspec.compiler.cli import run_command as base
  return base(sub, run_other=_run_other)


def _run_other(backend: str, file, inputs: dict, timeout) -> dict | int:
  """Outputs of the graph file on `backend`, or the exit code after saying why not."""
  from tinyspec.conformance.execute import run_graph, BackendUnavailable
  try: return run_graph(backend, file, inputs, float(timeout) if timeout else 60.0)
  except (KeyError, BackendUnavailable) as e:
    print(printable(f"tinyspec run: {str(e).strip(chr(34))}"), file=sys.stderr); return EXIT_UNREADABLE
  except (RuntimeError, ValueError) as e:
    rule = getattr(e, "rule", None)
    print(printable(f"{file}: {e}" + (f" [{rule}]" if rule and f"[{rule}]" not in str(e) else "")), file=sys.stderr)
    return EXIT_INVALID


def fuzz_command(sub):
  p = sub.add_parser("fuzz", help="property-based differential testing of a backend",
                     description="Draw valid graphs from the tables (conformance/strategies.py) and check the backend's value "
                                 "of every node against the reference evaluator, the validator, the derived min_max and (for the "
                                 "compiler) every stage graph (conformance/properties.py). Each failure is shrunk to a minimal "
                                 "graph and written as a corpus case under --out. Exit 0 when nothing failed, 1 when something "
                                 "did, 2 for bad usage or an unavailable backend.")
  p.add_argument("--backend", required=True, metavar="NAME", help="a registered backend, cmd:COMMAND, or an executable speaking the protocol")
  p.add_argument("--examples", type=int, default=100, metavar="N", help="graphs to draw (default 100)")
  p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0): the same seed draws the same graphs")
  p.add_argument("--out", type=Path, default=Path("fuzz-cases"), metavar="DIR", help="where the minimal failing cases go (default ./fuzz-cases)")
  p.add_argument("--level", choices=["tensor", "kernel", "both"], default="both", help="the level of the graphs drawn (default both)")
  p.add_argument("--max-ops", type=int, default=6, metavar="K", help="op nodes per graph at most (default 6)")
  p.add_argument("--no-stages", action="store_true", help="do not check the compiler's stage graphs")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="judge values by the canonical results (strict) or any allowed one (portable); default: the backend's")
  p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds one run may take before it counts as a hang (default 60)")
  p.add_argument("--sanitize", action="store_true",
                 help="c only: hostile graphs (conformance/hostile.py) through kernels built with AddressSanitizer, "
                      "UndefinedBehaviorSanitizer and, where threads run, ThreadSanitizer (conformance/sanitize.py)")
  p.add_argument("--families", metavar="F,...", default=None,
                 help="with --sanitize: the example families to draw (default all of conformance/hostile.py FAMILIES)")

  def run(a) -> int:
    from tinyspec.conformance.properties import fuzz, NoDrawableOps
    from tinyspec.conformance.execute import BackendUnavailable
    from tinyspec.refimpl import EvalError
    if a.examples < 1 or a.max_ops < 1: 
      print("tinyspec fuzz: --examples and --max-ops must be at least 1", file=sys.stderr); return EXIT_UNREADABLE
    if a.sanitize: return _run_sanitized(a)
    levels = ("tensor", "kernel") if a.level == "both" else (a.level,)
    if not a.timeout > 0: print("tinyspec fuzz: --timeout must be a positive number of seconds", file=sys.stderr); return EXIT_UNREADABLE
    try:
      with sigterm_raises():
        rep = fuzz(a.backend, a.examples, a.seed, a.out, levels, stages=not a.no_stages, max_ops=a.max_ops,
                   log=lambda m: print(printable(m), flush=True), timeout=a.timeout, profile=a.profile)
    except (KeyError, BackendUnavailable, NoDrawableOps) as e:
      print(printable(f"tinyspec fuzz: {str(e).strip(chr(34))}"), file=sys.stderr)
      return EXIT_UNREADABLE
    except EvalError as e:   # the oracle itself cannot run (a memory budget too small for any graph)
      print(printable(f"tinyspec fuzz: the reference evaluator cannot check the examples: {e}"), file=sys.stderr)
      return EXIT_INVALID
    except (KeyboardInterrupt, Terminated) as e:
      from tinyspec.deadline import kill_children
      kill_children()
      print(f"tinyspec fuzz: interrupted by {'SIGTERM' if isinstance(e, Terminated) else 'SIGINT'}", file=sys.stderr)
      return getattr(e, "exit_code", 130)
    for w in rep.written: print(f"wrote {w}")
    if rep.unwritten:   # the failures were found (and printed) but cannot be kept
      print(f"tinyspec fuzz: {rep.unwritten[0]}" + (f" (and {len(rep.unwritten) - 1} more)" if len(rep.unwritten) > 1 else ""), file=sys.stderr)
    if rep.refused:
      print("refused (documented limitations, not failures): " + ", ".join(f"{k} {v}" for k, v in sorted(rep.refused.items())))
    print(f"{rep.examples} examples, {len(rep.failures)} failures, {rep.seconds:.1f} s (backend {rep.backend}, seed {a.seed}, profile {rep.profile})")
    return EXIT_UNREADABLE if rep.unwritten else EXIT_OK if not rep.failures else EXIT_INVALID
  return p, run
