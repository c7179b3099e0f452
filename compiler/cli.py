"""`tinyspec compile` and `tinyspec run`.

  tinyspec compile FILE --target c|opencl [--dump-stages DIR] [--opt JSON | --beam N] [--allow-untrusted] [--explain]
      prints the rendered kernels; --dump-stages writes one graph file per stage
      (NN_stage.json), each accepted by `tinyspec validate`; --explain prints instead,
      stage by stage, the rewrite rules that fired and how often.
  tinyspec run FILE --backend ref|c|opencl [--input NAME=X.npy ...] [--out DIR] [--beam N]
      runs the graph and writes each output to DIR/NAME.npy, and prints each output as
      `tinyspec eval` does (name, dtype, shape, values).
Without --opt every kernel gets the device's default OptOps (compiler/passes/heuristics.py);
--beam N searches them by timing candidates on the device (width N) and caches the
winner under $TINYSPEC_CACHE/beam, so the next compile of the same kernel reads it.

Exit codes: 0 success, 1 the graph is refused or fails (the message names the rule id),
2 unreadable file or bad usage.
"""
from __future__ import annotations
import json
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.deadline import add_option
from tinyspec.rewrite import RewriteLimit, Trace
from tinyspec.files import FileRefused, load_npy, make_dir, output_path, printable, save_npy, write_file
from tinyspec.graph import load_file
from tinyspec.backends import Unavailable
from tinyspec.limits import default_budget
from tinyspec.refimpl.cli import summary


def _load(path: str):
  g, diags = load_file(path)
  if g is None or any(d.fatal for d in diags):
    for d in diags: print(d.format(), file=sys.stderr)
    return None, max((d.exit_code for d in diags), default=EXIT_UNREADABLE)
  return g, EXIT_OK


def _refusal(path: str, e) -> int:
  print(printable(f"{path}: {e.msg if hasattr(e, 'msg') else e} [{e.rule}]"), file=sys.stderr)
  return EXIT_INVALID


def _failure(path: str, e) -> int:
  """A build or device failure, no traceback: a backend this machine cannot run (no OpenCL
  device that builds: rule backend.unavailable, its message says what to do) exits 2; a
  build error (a compiler bug, the message says where) exits 1."""
  if isinstance(e, Unavailable):
    print(printable(f"tinyspec: {e}"), file=sys.stderr)
    return EXIT_UNREADABLE
  print(printable(f"{path}: {type(e).__name__}: {str(e)[:4000]}"), file=sys.stderr)
  return EXIT_INVALID


def _runtime_errors():
  from tinyspec.compiler.runtime import BuildError  # noqa: PLC0415 (start-up time: tinyspec run --backend ref, and a refused file, do not load the compiler)
  from tinyspec.compiler.runtime.opencl import OpenCLUnavailable  # noqa: PLC0415 (start-up time: tinyspec run --backend ref, and a refused file, do not load the compiler)
  return (BuildError, OpenCLUnavailable, RewriteLimit, RecursionError, MemoryError)


def compile_command(sub):
  p = sub.add_parser("compile", help="lower a graph to C or OpenCL C kernels",
                     description="Compile a graph file through the lowering pipeline and print the kernels. "
                                 "Exit 0 compiled, 1 refused (rule id printed), 2 unreadable file or bad usage.")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--target", choices=["c", "opencl"], default="c")
  p.add_argument("--dump-stages", metavar="DIR", help="write one graph file per stage into DIR")
  p.add_argument("--opt", metavar="JSON", help='OptOps for every kernel, e.g. \'[["SPLIT", 0, [4, "THREAD"]]]\', or {"kernel name": [...]}')
  p.add_argument("--beam", metavar="N", type=int, default=None, help="BEAM search of width N for the kernels --opt does not set (cached on disk)")
  p.add_argument("--allow-untrusted", action="store_true",
                 help="accept the untrusted ops (CUSTOM, INS, CUSTOMFUNCTION: opaque code the tables give no semantics; their text "
                      "is pasted into the kernel source as it is). Without it such a graph is refused (rule compile.untrusted)")
  p.add_argument("--build", action="store_true", help="also build the kernels with the target's compiler")
  p.add_argument("--explain", action="store_true", help="print, stage by stage, the rewrite rules that fired (and how often) instead of the source")
  add_option(p)

  def run(a) -> int:
    from tinyspec.compiler import compile_graph, CompileError  # noqa: PLC0415 (start-up time: tinyspec run --backend ref, and a refused file, do not load the compiler)
    g, code = _load(a.file)
    if g is None: return code
    try: opts = json.loads(a.opt) if a.opt else None
    except json.JSONDecodeError as e:
      print(f"--opt: not JSON: {e}", file=sys.stderr); return EXIT_UNREADABLE
    try:
      if a.beam is not None and a.beam < 0: print("--beam: N >= 0", file=sys.stderr); return EXIT_UNREADABLE
      trace = Trace()
      c = compile_graph(g, a.target, opts, a.allow_untrusted, beam=a.beam, trace=trace)
      if a.build: c.executable()
    except CompileError as e:
      return _refusal(a.file, e)
    except _runtime_errors() as e:
      return _failure(a.file, e)
    if a.dump_stages:
      try: dump_stages(c, a.dump_stages)
      except FileRefused as e: print(f"tinyspec compile: {e}", file=sys.stderr); return e.exit_code
    print(explain(trace) if a.explain else c.source(), end="")
    return EXIT_OK
  return p, run


def explain(trace) -> str:
  """Each stage that fired rules, then each rule with how often it fired (most first)."""
  lines = []
  for stage, counts in trace.by_stage().items():
    lines.append(f"{stage}:")
    lines += [f"  {rule} x{n}" for rule, n in sorted(counts.items(), key=lambda rn: (-rn[1], rn[0]))]
  return "\n".join(lines) + "\n" if lines else "no rewrite rule fired\n"


def dump_stages(c, where) -> list[Path]:
  """One graph file per stage in DIR (file names from the fixed stage names)."""
  d = make_dir(where)
  written = []
  for n, (name, g) in enumerate(c.stages.items()):
    for k, gg in (enumerate(g) if isinstance(g, list) else [(None, g)]):
      f = output_path(d, f"{n:02d}_{name}" + ("" if k is None else f".k{k}"), ".json", "stage name")
      written.append(write_file(f, gg.dumps()))
  return written


def parse_inputs(items) -> dict:
  """--input NAME=X.npy arguments, each read as a checked .npy (tinyspec.files) within the memory budget."""
  out = {}
  left = default_budget()
  for it in items or ():
    if "=" not in it: raise ValueError(f"--input {it!r}: expected NAME=FILE.npy")
    name, path = it.split("=", 1)
    out[name] = load_npy(path, left)
    left -= out[name].nbytes
  return out


BUILT_IN = ("ref", "c", "opencl")   # run in this process (the compiler's with --beam)


def run_command(sub, run_other=None):
  """`tinyspec run`. run_other(a, inputs) -> outputs (or an exit code) runs any other
  backend from the parsed arguments (the conformance layer passes its protocol runner:
  tinyspec.conformance.cli, which also picks the project's backend when --backend is not
  given)."""
  p = sub.add_parser("run", help="run a graph on the reference evaluator, a compiled backend or any other backend",
                     description="Run a graph, or judge one conformance case (--case). Exit 0 success, 1 refused or failed, "
                                 "2 unreadable input, bad usage or an unknown or unavailable backend, 5 a case not run.")
  p.add_argument("file", metavar="FILE", nargs="?", help="the graph file (or --case: judge a conformance case)")
  p.add_argument("--backend", default=None, metavar="NAME",
                 help="ref, c, opencl, any registered backend (entry point group tinyspec.backends), cmd:COMMAND or the path "
                      "of an executable speaking the backend protocol (`tinyspec docs`: protocol.md); default: the backend of "
                      "the project's pyproject.toml [tool.tinyspec], else ref")
  p.add_argument("--input", action="append", metavar="NAME=X.npy", help="an input array (repeatable)")
  p.add_argument("--out", metavar="DIR", help="write each output to DIR/NAME.npy (bfloat16 as its uint16 bit patterns, as the case corpus stores it)")
  p.add_argument("--allow-untrusted", action="store_true",
                 help="ref, c, opencl: accept the untrusted ops (CUSTOM, INS, CUSTOMFUNCTION: opaque code the tables give no "
                      "semantics); without it such a graph is refused (rule eval.untrusted, compile.untrusted)")
  p.add_argument("--cast", action="store_true",
                 help="ref, c, opencl: convert an input whose dtype is not its buffer's when every value converts exactly "
                      "(without it: refused, rule eval.input, exit 2)")
  p.add_argument("--beam", metavar="N", type=int, default=None, help="c/opencl: BEAM search of width N for every kernel (cached on disk)")
  add_option(p)

  def run(a) -> int:
    a.backend = a.backend or "ref"
    if a.beam is not None and a.beam < 0: print("--beam: N >= 0", file=sys.stderr); return EXIT_UNREADABLE
    if a.file is None: print("tinyspec run: give the graph FILE to run", file=sys.stderr); return EXIT_UNREADABLE
    g, code = _load(a.file)
    if g is None: return code
    try: inputs = parse_inputs(a.input)
    except FileRefused as e:
      print(f"tinyspec run: {e}", file=sys.stderr); return EXIT_INVALID if e.rule == "eval.budget" else EXIT_UNREADABLE
    except ValueError as e:
      print(f"tinyspec run: {printable(e)}", file=sys.stderr); return EXIT_UNREADABLE
    if a.backend not in BUILT_IN:
      if run_other is None: print(f"tinyspec run: unknown backend {a.backend!r}", file=sys.stderr); return EXIT_UNREADABLE
      if a.beam is not None: print("tinyspec run: --beam is for c and opencl", file=sys.stderr); return EXIT_UNREADABLE
      out = run_other(a, inputs)
      if isinstance(out, int): return out
    try:
      if a.backend not in BUILT_IN: pass
      elif a.backend == "ref":
        from tinyspec.refimpl import evaluate, EvalError  # noqa: PLC0415 (start-up time: the compiled backends do not load the reference)
        try: out = evaluate(g, inputs, allow_untrusted=a.allow_untrusted, cast=a.cast)
        except EvalError as e:
          lines = [d.format().replace("<graph>", a.file) for d in e.diagnostics] or [printable(f"{a.file}: {e}")]   # as `tinyspec eval`
          print("\n".join(lines), file=sys.stderr); return getattr(e, "exit_code", EXIT_INVALID)
      else:
        from tinyspec.compiler import compile_graph, CompileError  # noqa: PLC0415 (start-up time: tinyspec run --backend ref, and a refused file, do not load the compiler)
        try: out = compile_graph(g, a.backend, None, a.allow_untrusted, keep_stages=False, beam=a.beam).run(inputs, cast=a.cast)
        except CompileError as e: return _refusal(a.file, e)
        except _runtime_errors() as e: return _failure(a.file, e)
    except ValueError as e:
      print(printable(f"{a.file}: {e}"), file=sys.stderr); return EXIT_UNREADABLE
    if a.out:
      try:
        d = make_dir(a.out)
        for k, v in out.items(): save_npy(d, k, v)
      except FileRefused as e:
        print(f"tinyspec run: {e}", file=sys.stderr); return e.exit_code
    for k, v in out.items(): print(summary(k, v))
    return EXIT_OK
  return p, run
