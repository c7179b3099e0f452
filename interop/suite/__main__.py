"""python -m tinyspec.interop.suite report DIR [--classes FILE] [--json FILE] [--rediagnose] [--recheck] (report.py)."""
from __future__ import annotations
import argparse
import json
import sys
from tinyspec.interop.suite.classify import TableError, load_rules
from tinyspec.interop.suite.kept import rediagnose
from tinyspec.interop.suite.report import RecordError, load, summarize


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m tinyspec.interop.suite",
                              description="Report a captured run of tinygrad's own tests (docs/tinygrad-suite.md).")
  sub = p.add_subparsers(dest="command", required=True)
  r = sub.add_parser("report", help="every failing graph with its class, the class counts, the summary line last")
  r.add_argument("out", metavar="DIR", help="the folder the plugin wrote its records to (--tinygrad-suite-out)")
  r.add_argument("--classes", metavar="FILE", default=None, help="the classification table (default: the shipped one)")
  r.add_argument("--json", metavar="FILE", default=None, help="also write the figures and every failure as JSON here")
  r.add_argument("--rediagnose", action="store_true", help="diagnose again the disagreements whose graphs the run kept (DIR/failing/)")
  r.add_argument("--recheck", action="store_true", help="validate, evaluate and compare again the failing graphs the run kept, then diagnose")
  a = p.parse_args(argv)
  try:
    rules = load_rules(a.classes)
    records = load(a.out)
  except (TableError, RecordError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not records:
    print(f"error: no records in {a.out} (records-*.jsonl, written by -p tinyspec.interop.suite.plugin)", file=sys.stderr)
    return 2
  if a.rediagnose or a.recheck: print(f"judged again: {rediagnose(records, a.out, a.recheck)} kept graphs")
  s = summarize(records, rules)
  for f in sorted(s.failures, key=lambda f: (f.rule is not None, f.rule.kind if f.rule else "", f.test, f.graph)):
    print(f.line())
  if s.failed_tests:
    print(f"tinygrad's tests that failed as run here ({len(s.failed_tests)}; their schedules up to the failure are counted):")
    for test, error, rule in sorted(s.failed_tests, key=lambda t: t[:2]):
      print(f"  {f'{rule.kind} [{rule.id}: {rule.ref}]' if rule else 'UNCLASSIFIED'} {test}: {error}")
  for line in s.class_lines(): print(line)
  if a.json:
    with open(a.json, "w", encoding="utf-8") as fh: json.dump(s.to_json(), fh, indent=1)
  print(s.line())
  return 1 if s.unclassified else 0


if __name__ == "__main__":
  sys.exit(main())
