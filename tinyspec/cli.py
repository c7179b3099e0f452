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
# `--json` reports have a fixed form, described by spec/report.schema.json:
#   validate: {"format": "tinyspec-validate", "version": 1, "valid", "exit", "files": [
#               {"file", "valid", "exit", "level", "nodes", "untrusted": [node...], "errors": [
#                 {"file", "node", "op", "rule", "message"}]}]}
#   props:    {"format": "tinyspec-props", "version": 1, "file", "valid", "exit", "level",
#              "errors": [...], "nodes": [{"node", "op", "dtype", "shape", "device",
#              "addrspace", "min_max", "axis"} or {"node", "op", "error": true}]}
# Float specials in min_max are the strings "inf", "-inf" (as in graph files).

def _file_report(f: str, res) -> dict:
  return {"file": f, "valid": res.ok, "exit": res.exit_code, "level": res.level,
          "nodes": len(res.graph.nodes) if res.graph is not None else None,
          "untrusted": res.untrusted(), "errors": [d.to_json() for d in res.diagnostics]}


@command("validate", "check graph files against the tables")
def _validate_cmd(sub):
  p = sub.add_parser("validate", help="check graph files against the tables",
                     description="Check graph files against the tables and report every broken rule as "
                                 "'FILE: node N (OP): message [rule-id]'. Exit 0 when all are valid, 1 when one is invalid, "
                                 "2 when one cannot be read or parsed (or bad usage).")
  p.add_argument("files", nargs="+", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto",
                 help="the level to check the graph at (auto: the file's `level`, else detected from its ops)")
  p.add_argument("--json", action="store_true", help="print one JSON report (form: spec/report.schema.json)")
  p.add_argument("-q", "--quiet", action="store_true", help="print nothing for valid files")

  def run(a) -> int:
    from tinyspec.validate import validate_file
    worst, files = EXIT_OK, []
    for f in a.files:
      res = validate_file(f, a.level)
      worst = max(worst, res.exit_code)
      if a.json: files.append(_file_report(f, res)); continue
      for d in res.diagnostics: print(d.format())
      if res.ok and not a.quiet:
        note = ""
        if res.untrusted():
          ops = sorted({res.graph.nodes[i].op for i in res.untrusted()})
          note = f"; untrusted op(s) {', '.join(ops)}: evaluators and compilers refuse them unless explicitly allowed"
        print(f"{f}: valid ({len(res.graph.nodes)} nodes, {res.level} level{note})")
    if a.json:
      print(json.dumps({"format": "tinyspec-validate", "version": 1, "valid": worst == EXIT_OK, "exit": worst, "files": files}, indent=1))
    return worst
  return p, run


def _fmt(v):
  if v is None: return "null"
  if isinstance(v, tuple): return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
  return str(v)


@command("props", "print every node's derived properties")
def _props_cmd(sub):
  p = sub.add_parser("props", help="print every node's derived properties",
                     description="Print the six derived properties (dtype, shape, device, addrspace, min_max, axis) of every "
                                 "node. Broken nodes print as (invalid) and their errors go to stderr. Exit codes as validate.")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto")
  p.add_argument("--json", action="store_true", help="print one JSON report (form: spec/report.schema.json)")

  def run(a) -> int:
    from tinyspec.validate import validate_file
    from tinyspec.tables import PROPS
    res = validate_file(a.file, a.level)
    if not a.json:
      for d in res.diagnostics: print(d.format(), file=sys.stderr)
    rows = []
    for i, (n, v) in enumerate(zip(res.graph.nodes, res.views) if res.graph is not None and res.views else ()):
      if a.json:
        rows.append({"node": i, "op": n.op, **({p: _jsonable(getattr(v, p)) for p in PROPS} if v is not None else {"error": True})})
      elif v is None:
        print(f"{i:5d} {n.op:<12} (invalid)")
      else:
        print(f"{i:5d} {n.op:<12} dtype={_fmt(v.dtype)} shape={_fmt(v.shape)} device={_fmt(v.device)} "
              f"addrspace={_fmt(v.addrspace)} min_max={_fmt(v.min_max)} axis={_fmt(v.axis)}")
    if a.json:
      print(json.dumps({"format": "tinyspec-props", "version": 1, "file": a.file, "valid": res.ok, "exit": res.exit_code,
                        "level": res.level, "errors": [d.to_json() for d in res.diagnostics], "nodes": rows}, indent=1))
    return res.exit_code
  return p, run


def _jsonable(v):
  if isinstance(v, tuple): return [_jsonable(x) for x in v]
  if isinstance(v, float) and v != v: return "nan"
  if isinstance(v, float) and v in (float("inf"), float("-inf")): return "inf" if v > 0 else "-inf"
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
  argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
  first = next((a for a in argv if not a.startswith("-")), None)
  if first not in COMMANDS: _load_plugins()   # validate/props need no plugin (and start faster without)
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
  # run as `python -m tinyspec.cli`: the other packages register their commands in the
  # imported module tinyspec.cli, not in this __main__ copy of it
  from tinyspec.cli import main as _main
  sys.exit(_main())
