"""`tinyspec case new FILE DIR [--input NAME=X.npy|X.npz]...` and `tinyspec case pin DIR...`.

`new` makes DIR a conformance case of the graph FILE: its inputs (those --input does not
give are filled with the edge values of their dtypes, and said), the reference evaluator's
outputs, the bounds the tables' tolerances give and the sha256 pin. `pin` sets the pin of
a case made or changed by hand to what its files hash to. A corpus of such cases runs with
`tinyspec conformance --cases DIR` (or `[tool.tinyspec] cases`). Exit 0 written, 1 an
invalid graph or a refused evaluation, 2 bad usage, an unreadable file or a folder that
cannot be written.
"""
from __future__ import annotations
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_UNREADABLE
from tinyspec.files import printable
from tinyspec.conformance.corpus.newcase import write_graph_case, CaseMakingError, pin


def _say(msg: str) -> None: print(printable(f"tinyspec case: {msg}"), file=sys.stderr)


def _new(a) -> int:
  from tinyspec.refimpl.cli import read_inputs, InputError  # noqa: PLC0415 (start-up time: only `case new` loads the reference)
  try:
    inputs = read_inputs(a.input)
    meta, filled = write_graph_case(a.dir, a.file, inputs, description=a.description or f"made from {Path(a.file).name}",
                                    case_id=a.id)
  except InputError as e:
    _say(str(e)); return e.exit_code
  except CaseMakingError as e:
    _say(str(e)); return e.exit_code
  for name in filled: print(printable(f"{name}: not given, filled with the edge values of its dtype"))
  outs = ", ".join(f"{k} ({o['dtype']})" for k, o in meta["outputs"].items())
  print(printable(f"wrote {a.dir}: outputs {outs or 'none'} from the reference evaluator, sha256 {meta['sha256'][:16]}..."))
  print(printable(f"run it: tinyspec run --case {a.dir} --backend NAME"))
  return EXIT_OK


def _pin(a) -> int:
  worst = EXIT_OK
  for d in a.dirs:
    try: old, new = pin(d)
    except CaseMakingError as e:
      _say(str(e)); worst = max(worst, e.exit_code); continue
    print(printable(f"{d}: sha256 {new[:16]}..." + (" (unchanged)" if old == new else f" (was {old[:16] or 'none'})")))
  return worst


def case_command(sub):
  p = sub.add_parser("case", help="make a conformance case from a graph, or pin a case changed by hand",
                     description="`case new FILE DIR`: make DIR a conformance case of the graph FILE (expected outputs from "
                                 "the reference evaluator, bounds from the tables, the sha256 pin). `case pin DIR...`: set a "
                                 "case's sha256 pin to what its files hash to (after changing them by hand). Exit 0 written, 1 "
                                 "an invalid graph or a refused evaluation, 2 bad usage or an unreadable file.")
  sp = p.add_subparsers(dest="action", metavar="new|pin", required=True)
  n = sp.add_parser("new", help="make DIR a case of the graph FILE")
  n.add_argument("file", metavar="FILE", help="the graph file")
  n.add_argument("dir", metavar="DIR", type=Path, help="the case folder to write (its id is its path below the corpus folder)")
  n.add_argument("--input", "-i", action="append", default=[], metavar="NAME=X.npy|X.npz",
                 help="an input array (repeatable; in its buffer's dtype); inputs not given get the edge values of their dtype")
  n.add_argument("--id", default=None, help="the case's id (default: its folder below the corpus it is read from)")
  n.add_argument("--description", default=None, metavar="TEXT", help="what the case is about")
  pp = sp.add_parser("pin", help="set the sha256 pin of each case DIR to what its files hash to")
  pp.add_argument("dirs", metavar="DIR", nargs="+", type=Path)

  def run(a) -> int:
    return _new(a) if a.action == "new" else _pin(a) if a.action == "pin" else EXIT_UNREADABLE
  return p, run
