"""`tinyspec conformance`: run the conformance cases through backends and summarize.

Today the cases are the rule corpus (conformance/rules) and the backend is tinyspec's
own validator; backends registered with conformance.runner.register_backend show up in
--backend. Prints failures (every case with -v) and the line `N passed, N failed`.
Exit 0 when every case passes, 1 when some fail or error, 2 for bad usage or a corpus
that cannot be read.
"""
from __future__ import annotations
import json
import sys
from pathlib import Path
from tinyspec.cli import command
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE


@command("conformance", "run the conformance suite (today: the rule corpus through the validator)")
def _conformance_cmd(sub):
  from conformance import runner
  p = sub.add_parser("conformance", help="run the conformance suite",
                     description="Run the conformance cases through backends. Exit 0 when all pass, 1 when some fail, "
                                 "2 for bad usage or an unreadable corpus.")
  p.add_argument("--cases", metavar="DIR", type=Path, default=None, help="the case folder (default: conformance/rules)")
  p.add_argument("-k", dest="patterns", metavar="PATTERN", action="append",
                 help="run only cases whose id contains PATTERN (or matches it as a glob); repeat to narrow further")
  p.add_argument("--backend", dest="backends", metavar="NAME", action="append",
                 help=f"backend to run (repeatable; default: {', '.join(runner.DEFAULT_BACKENDS)}; known: {', '.join(sorted(runner.BACKENDS))})")
  p.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE")
  p.add_argument("-v", "--verbose", action="store_true", help="print every case, not only failures")
  p.add_argument("--list", action="store_true", help="list the selected cases and exit")

  def run(a) -> int:
    from conformance.rulecases import CorpusError
    names = a.backends or list(runner.DEFAULT_BACKENDS)
    unknown = [n for n in names if n not in runner.BACKENDS]
    if unknown:
      print(f"tinyspec conformance: unknown backend(s) {', '.join(unknown)} (known: {', '.join(sorted(runner.BACKENDS))})", file=sys.stderr)
      return EXIT_UNREADABLE
    try:
      cases = runner.select(runner.load_cases(a.cases), a.patterns)
    except CorpusError as e:
      print(f"tinyspec conformance: {e}", file=sys.stderr)
      return EXIT_UNREADABLE
    if not cases:
      print("tinyspec conformance: no case matches" + (f" {' and '.join(a.patterns)}" if a.patterns else ""), file=sys.stderr)
      return EXIT_UNREADABLE
    if a.list:
      for c in cases: print(c.id)
      return EXIT_OK
    backends = [runner.BACKENDS[n]() for n in names]

    def show(r):
      if r.status == "pass" and not a.verbose: return
      if r.status == "skip" and not a.verbose: return
      line = f"{r.status.upper():5s} {r.backend} {r.case}"
      print(line + (f": {r.message}" if r.message else ""))

    results = runner.run(cases, backends, show)
    c = runner.counts(results)
    print(runner.summary_line(c))
    if a.json:
      try:
        Path(a.json).write_text(json.dumps(runner.report_json(results, names, str(a.cases or "conformance/rules")), indent=1) + "\n")
      except OSError as e:
        print(f"tinyspec conformance: cannot write {a.json}: {e.strerror or e}", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_OK if c["fail"] == 0 and c["error"] == 0 else EXIT_INVALID
  return p, run
