"""`tinyspec` console script. Subcommands register themselves in COMMANDS so that later
parts of the project (eval, compile, run, conformance, fuzz, import-tinygrad) plug in
without touching the dispatcher.

Exit codes: 0 success/valid, 1 invalid graph or failed run, 2 unreadable input or bad usage.
"""
from __future__ import annotations
import argparse
import json
import sys
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE

COMMANDS: dict[str, tuple] = {}   # name -> (add_arguments(parser), run(args) -> int, help)


def command(name: str, help: str):
  def deco(fn):
    COMMANDS[name] = (fn, help)
    return fn
  return deco


class _Parser(argparse.ArgumentParser):
  def error(self, message):   # argparse exits 2 on bad usage; keep that, but say where
    self.print_usage(sys.stderr)
    print(f"{self.prog}: error: {message}", file=sys.stderr)
    sys.exit(EXIT_UNREADABLE)


# ------------------------------------------------------------------ validate / props
@command("validate", "check graph files against the tables")
def _validate_cmd(sub):
  p = sub.add_parser("validate", help="check graph files against the tables",
                     description="Check graph files. Exit 0 valid, 1 invalid, 2 unreadable file or bad usage.")
  p.add_argument("files", nargs="+", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto")
  p.add_argument("--json", action="store_true", help="print one JSON report for machines")
  p.add_argument("-q", "--quiet", action="store_true", help="print nothing for valid files")

  def run(a) -> int:
    from tinyspec.validate import validate_file
    worst, report = EXIT_OK, []
    for f in a.files:
      res = validate_file(f, a.level)
      worst = max(worst, res.exit_code)
      if a.json:
        report.append({"file": f, "valid": res.ok, "level": res.level, "nodes": len(res.graph.nodes) if res.graph else None,
                       "errors": [d.to_json() for d in res.diagnostics]})
      else:
        for d in res.diagnostics: print(d.format())
        if res.ok and not a.quiet: print(f"{f}: valid ({len(res.graph.nodes)} nodes, {res.level} level)")
    if a.json: print(json.dumps(report if len(report) != 1 else report[0], indent=1))
    return worst
  return p, run


def _fmt(v):
  if v is None: return "null"
  if isinstance(v, tuple): return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
  return str(v)


@command("props", "print every node's derived properties")
def _props_cmd(sub):
  p = sub.add_parser("props", help="print every node's derived properties")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto")
  p.add_argument("--json", action="store_true")

  def run(a) -> int:
    from tinyspec.validate import validate_file
    from tinyspec.tables import PROPS
    res = validate_file(a.file, a.level)
    for d in res.diagnostics: print(d.format(), file=sys.stderr)
    if res.graph is None: return res.exit_code
    rows = []
    for i, (n, v) in enumerate(zip(res.graph.nodes, res.views)):
      if a.json:
        rows.append({"node": i, "op": n.op, **({p: _jsonable(getattr(v, p)) for p in PROPS} if v else {"error": True})})
      elif v is None:
        print(f"{i:5d} {n.op:<12} (invalid)")
      else:
        print(f"{i:5d} {n.op:<12} dtype={_fmt(v.dtype)} shape={_fmt(v.shape)} device={_fmt(v.device)} "
              f"addrspace={_fmt(v.addrspace)} min_max={_fmt(v.min_max)} axis={_fmt(v.axis)}")
    if a.json: print(json.dumps(rows, indent=1))
    return res.exit_code
  return p, run


def _jsonable(v):
  if isinstance(v, tuple): return [_jsonable(x) for x in v]
  if isinstance(v, float) and v != v: return "nan"
  if v in (float("inf"), float("-inf")): return "inf" if v > 0 else "-inf"
  return v


# ------------------------------------------------------------------ entry point
def _load_plugins():
  """Import the modules whose subcommands live outside this file (if installed)."""
  import importlib
  for mod in ("refimpl.cli", "compiler.cli", "conformance.cli", "interop.cli"):
    try: importlib.import_module(mod)
    except ModuleNotFoundError as e:
      if e.name is None or not mod.startswith(e.name): raise


def main(argv=None) -> int:
  _load_plugins()
  parser = _Parser(prog="tinyspec", description="Executable specification of tinygrad's UOp IR.",
                   epilog="exit codes: 0 success/valid, 1 invalid graph or failed run, 2 unreadable input or bad usage")
  sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
  runners = {}
  for name, (fn, _help) in COMMANDS.items():
    _, runners[name] = fn(sub)
  a = parser.parse_args(argv)
  if not a.cmd:
    parser.print_help(); return EXIT_UNREADABLE
  try:
    return runners[a.cmd](a)
  except KeyboardInterrupt:
    return 130
  except BrokenPipeError:
    return EXIT_OK


if __name__ == "__main__":
  sys.exit(main())
