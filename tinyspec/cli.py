"""`tinyspec` console script: a dispatcher over subcommands.

Each subcommand is a function `(subparsers) -> (parser, run)` named in the entry point
group `tinyspec.commands` (pyproject.toml), so a package of any layer adds commands
without this module importing it: validate and props (here), eval (refimpl), compile and
run (compiler), conformance and fuzz (conformance), import-tinygrad (interop), docs
(tinyspec.docgen). Only the command that runs is imported.

Exit codes: 0 success/valid, 1 invalid graph or failed run, 2 unreadable input or bad usage,
5 a conformance run in which no case ran.
"""
from __future__ import annotations
import argparse
import json
import os
import sys
from tinyspec.files import control_character, printable
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.deadline import add_option
from tinyspec.validate import validate_file
from tinyspec.tables import PROPS
from tinyspec.plugins import entry_points
from tinyspec import __version__
from tinyspec.tables import tables_version
from tinyspec import deadline, environment

COMMAND_GROUP = "tinyspec.commands"


def add_timeout(p) -> None:
  add_option(p)


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


def validate_command(sub):
  p = sub.add_parser("validate", help="check graph files against the tables",
                     description="Check graph files against the tables and report every broken rule as "
                                 "'FILE: node N (OP): message [rule-id]'. Exit 0 when all are valid, 1 when one is invalid, "
                                 "2 when one cannot be read or parsed (or bad usage).")
  p.add_argument("files", nargs="+", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto",
                 help="the level to check the graph at (auto: the file's `level`, else detected from its ops)")
  p.add_argument("--json", action="store_true", help="print one JSON report (form: spec/report.schema.json)")
  p.add_argument("-q", "--quiet", action="store_true", help="print nothing for valid files")
  add_timeout(p)

  def run(a) -> int:
    worst, files = EXIT_OK, []
    for f in a.files:
      res = validate_file(f, a.level)
      worst = max(worst, res.exit_code)
      if a.json: files.append(_file_report(f, res)); continue
      for d in res.diagnostics: print(d.format())
      if res.ok and not a.quiet:
        note = ""
        assert res.graph is not None   # a valid file has its graph
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


def props_command(sub):
  p = sub.add_parser("props", help="print every node's derived properties",
                     description="Print the six derived properties (dtype, shape, device, addrspace, min_max, axis) of every "
                                 "node. Broken nodes print as (invalid) and their errors go to stderr. Exit codes as validate.")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto")
  p.add_argument("--json", action="store_true", help="print one JSON report (form: spec/report.schema.json)")
  add_timeout(p)

  def run(a) -> int:
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
def _commands() -> dict:
  """Subcommand name -> its entry point (not loaded yet)."""
  return entry_points(COMMAND_GROUP)


def version_text() -> str:
  """The package's version and the spec tables' version (with a digest of their text, so
  two installs with the same numbers but edited tables tell apart)."""
  v, digest = tables_version()
  return f"tinyspec {__version__} (spec tables version {v}, sha256 {digest[:12]})"


def _control_in_options(argv: list, parser) -> str | None:
  """What is wrong with the first option value that holds a NUL or another control
  character (no setting may: tinyspec.files.control_character), or None. Checked before
  parsing, so an option of any type (a number, a choice) is refused the same way. File
  and folder arguments are not settings: a hostile name comes back escaped where it is named."""
  takes = {o: a for a in parser._actions for o in a.option_strings if a.nargs != 0}
  for k, arg in enumerate(argv):
    if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in takes: name, value = arg.split("=", 1)
    elif k and argv[k - 1] in takes: name, value = argv[k - 1], arg
    else: continue
    bad = control_character(value)
    if bad: return f"{printable(name)[:80]} {printable(repr(value))[:200]}: holds the control character {bad} [setting.value]"
  return None


def main(argv=None, owns_process: bool | None = None) -> int:
  """Run one subcommand. Called without argv (the console script) it owns the process
  (owns_process says so for a caller with argv): a command past its --timeout then ends
  the process even from inside native code."""
  owns_process = argv is None if owns_process is None else owns_process
  argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
  eps = _commands()
  first = next((a for a in argv if not a.startswith("-")), None)
  # load only the command that runs (a graph check should not import the compiler);
  # help and usage errors list them all
  chosen = [first] if first in eps else sorted(eps)
  parser = _Parser(prog="tinyspec", description="Executable specification of tinygrad's UOp IR.",
                   epilog="exit codes: 0 success/valid, 1 invalid graph or failed run, 2 unreadable input or bad usage, "
                          "5 a conformance run in which no case ran")
  parser.add_argument("--version", action="version", version=version_text())
  sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
  runners = {}
  for name in chosen:
    try: add = eps[name].load()
    except Exception as e:   # a broken third-party command must not take the others down
      print(f"tinyspec: command {name!r} cannot be loaded ({type(e).__name__}: {e})", file=sys.stderr)
      if name == first: return EXIT_UNREADABLE
      continue
    _, runners[name] = add(sub)
  bad = _control_in_options(argv, sub.choices[first]) if first in sub.choices else None
  if bad:
    print(f"tinyspec {first}: {bad}", file=sys.stderr); return EXIT_UNREADABLE
  a = parser.parse_args(argv)
  if not a.cmd:
    parser.print_help(); return EXIT_UNREADABLE
  try: environment.check_all()
  except environment.EnvironmentValue as e:
    print(f"tinyspec {a.cmd}: {e}", file=sys.stderr); return EXIT_UNREADABLE
  limit = getattr(a, "time_limit", None)
  if hasattr(a, "time_limit") and limit is None: limit = deadline.default_seconds()
  try:
    with deadline.time_limit(limit, hard=owns_process, label=f"tinyspec {a.cmd}"):
      return runners[a.cmd](a)
  except deadline.TimeLimit as e:
    print(f"tinyspec {a.cmd}: {e}", file=sys.stderr)
    if owns_process:   # threads still in native code would hold the exit: end the process now
      deadline.kill_children()
      sys.stdout.flush(); sys.stderr.flush()
      os._exit(EXIT_INVALID)
    return EXIT_INVALID
  except KeyboardInterrupt:
    deadline.kill_children()   # backends and compilers this command started
    return 130
  except BrokenPipeError:
    return EXIT_OK


if __name__ == "__main__":
  sys.exit(main())
