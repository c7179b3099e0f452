"""`tinyspec import-tinygrad SCRIPT.py... --out DIR`: run tinygrad scripts, write the graphs
of everything they realize (tensor level, each scheduled kernel, each lowered program),
their inputs and tinygrad's results, and check every graph against the spec.

Also registers the `tinygrad` conformance backend (interop/tinygrad_backend.py) for
checkouts where the package's entry points are not installed.

Exit 0 when every graph imports, validates and (tensor, kernel and program level) evaluates
to tinygrad's results within the portable profile's error bound (interop/compare.py); 1 when one does not, or a script fails; 2 for bad usage, an
unreadable script, or tinygrad missing.
"""
from __future__ import annotations
import json
import os
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.backends import register_backend, backend_names
from tinyspec.interop.tinygrad_device import have_clang
from tinyspec.interop.script import import_script
from tinyspec.files import FileRefused, printable


def _register_backend():
  def tinygrad_backend():
    from tinyspec.interop.tinygrad_backend import TinygradBackend  # noqa: PLC0415 (start-up time: the backend, 0.12 s to import, loads only when a run asks for it)
    return TinygradBackend()
  register_backend("tinygrad", tinygrad_backend, replace=False)


_register_backend()


def import_tinygrad_command(sub):
  p = sub.add_parser("import-tinygrad", help="run tinygrad scripts and import the graphs they realize",
                     description="Run each tinygrad script and write, for every realize it does, the tensor-level graph, "
                                 "each scheduled kernel and each lowered program as tinyspec graph files, with their inputs "
                                 "(NAME.inputs.npz) and tinygrad's results (NAME.OUTPUT.npy), and import-report.json. Every graph is "
                                 "validated and evaluated (every level) with the reference evaluator against tinygrad's results, "
                                 "judged within the portable profile's error bound propagated through the graph. "
                                 "Exit 0 when all match, 1 when one does not (any level), 2 for bad usage.")
  p.add_argument("scripts", nargs="+", metavar="SCRIPT.py")
  p.add_argument("--out", metavar="DIR", type=Path, help="where to write (several scripts: one folder per script)")
  p.add_argument("--no-check", action="store_true", help="only import and write; do not validate or evaluate")
  p.add_argument("--no-eval", action="store_true", help="validate but do not evaluate")
  p.add_argument("--backend", action="append", default=[], metavar="NAME",
                 help="also run every graph on this backend (c, opencl ...; repeatable) and judge it the same way")
  p.add_argument("--json", action="store_true", help="print the reports as JSON")
  p.add_argument("-v", "--verbose", action="store_true", help="print every graph, not only the failing ones")

  def run(a) -> int:
    # tinygrad reads DEV at import; unset, it probes its devices, and without clang none
    # opens ("no usable devices"): the CPU device with clang, else the PYTHON emulator.
    os.environ.setdefault("DEV", "CPU" if have_clang() else "PYTHON")
    try:
      import tinygrad  # noqa: F401, PLC0415 (tinygrad, an optional dependency)
    except ImportError:
      print("tinyspec import-tinygrad: tinygrad is not installed (pip install 'tinyspec[tinygrad]')", file=sys.stderr)
      return EXIT_UNREADABLE
    backends = [b for arg in a.backend for b in arg.split(",") if b]
    unknown = [b for b in backends if b not in backend_names()]
    if unknown:
      print(printable(f"tinyspec import-tinygrad: no backend {', '.join(unknown)} (there are: {', '.join(backend_names())})"), file=sys.stderr)
      return EXIT_UNREADABLE
    missing = [s for s in a.scripts if not Path(s).is_file()]
    if missing:
      print(printable(f"tinyspec import-tinygrad: no such script: {', '.join(missing)}"), file=sys.stderr)
      return EXIT_UNREADABLE
    worst, reports = EXIT_OK, []
    for s in a.scripts:
      res = import_script(s, check=not a.no_check, evaluate=not a.no_eval, backends=backends)
      if a.out is not None:
        try:
          res.write(a.out if len(a.scripts) == 1 else a.out / Path(s).stem)
        except FileRefused as e:
          print(f"tinyspec import-tinygrad: {e}", file=sys.stderr)
          return e.exit_code
      if not res.ok and not a.no_check: worst = EXIT_INVALID
      if res.error: worst = EXIT_INVALID
      if a.json: reports.append(res.summary()); continue
      _print(res, a.verbose, checked=not a.no_check, backends=backends)
    if a.json: print(json.dumps(reports if len(reports) > 1 else reports[0], indent=1))
    return worst
  return p, run


def _print(res, verbose: bool, checked: bool, backends=()) -> None:
  kinds = ", ".join(f"{n} {k}" for k, n in sorted(res.schedule.items()))
  head = f"{res.script}: {len(res.graphs)} graphs ({kinds or 'nothing scheduled'}) in {res.seconds:.1f} s"
  if res.error: head += f"; the script failed: {res.error}"
  print(head)
  if checked:
    c = res.counts()
    for lv in ("tensor", "kernel", "program"):
      if c.get(lv): print(f"  {lv:8s} {c[lv]:3d} graphs, {c.get(lv + ' valid', 0)} valid, "
                          f"{c.get(lv + ' eval ok', 0)} of {c.get(lv + ' evaluated', 0)} evaluated match tinygrad"
                          + "".join(f", {c.get(f'{lv} {b} ok', 0)} on {b}" for b in backends))
  for line in res.report.lines(): print("  " + line)
  for g in res.graphs:
    bad = checked and (not g.valid or (g.evaluation != "not run" and not g.eval_ok))
    if not (bad or verbose): continue
    print(f"  {'FAIL' if bad else 'ok  '} {g.name} ({g.level}, {len(g.graph.nodes)} nodes): "
          + ("valid" if g.valid else "; ".join(d.format() for d in g.diagnostics[:3])) + f"; {g.evaluation}"
          + "".join(f"; {b}: {r}" for b, r in g.runs.items() if verbose or not r.startswith("ok")))
