"""`tinyspec eval FILE --input NAME=FILE.npy ... [--input FILE.npz] [--out DIR|FILE.npz]`

Evaluates a graph file with the reference evaluator. Inputs are .npy files (named on
the command line) or .npz archives (each array under its own name). Outputs go to
--out: a directory (one NAME.npy per output) or a .npz file; without --out a summary is
printed. A buffer whose contents are read needs an input (or --zeros: zero-filled), and an
input needs its buffer's dtype (or --cast: converted where every value converts exactly). --trace also writes every node's value (trace.npz in the directory, or
`node{i}` entries in the .npz). Exit codes: 0 evaluated, 1 invalid graph or refused
evaluation, 2 unreadable graph or input file, or bad usage.
"""
from __future__ import annotations
import sys
from pathlib import Path
import numpy as np
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.files import load_npy, load_npz, FileRefused
from tinyspec.files import make_dir, save_npy, save_npz
from tinyspec.deadline import add_option
from tinyspec.graph import load_file
from tinyspec.refimpl import evaluate, EvalError
from tinyspec.refimpl.budget import Budget


class InputError(Exception):
  def __init__(self, message: str, exit_code: int = EXIT_UNREADABLE):
    super().__init__(message)
    self.exit_code = exit_code


def read_inputs(specs: list[str], budget: int | None = None) -> dict:
  """NAME=FILE.npy and FILE.npz arguments -> {name: array}. Each file is read as a
  regular file, its headers checked (tinyspec.files) and its arrays counted against the
  memory budget before their data is read."""
  inputs: dict = {}
  left = budget
  for spec in specs:
    name, path = spec.split("=", 1) if "=" in spec and not Path(spec).exists() else (None, spec)
    try:
      if path.endswith(".npz"):
        arrays = load_npz(path, left)
        if name is not None:
          if len(arrays) != 1: raise InputError(f"{path}: NAME=FILE.npz needs an archive with one array, this one has {len(arrays)}")
          arrays = {name: next(iter(arrays.values()))}
      else:
        if name is None: raise InputError(f"{spec}: give a .npy input as NAME=FILE.npy (or use a .npz archive)")
        arrays = {name: load_npy(path, left)}
    except FileRefused as e:
      raise InputError(str(e), EXIT_INVALID if e.rule == "eval.budget" else EXIT_UNREADABLE) from None
    for k, v in arrays.items():
      if k in inputs: raise InputError(f"input {k!r} is given twice")
      inputs[k] = v
      if left is not None: left -= v.nbytes
  return inputs


def summary(name, a) -> str:
  """How `tinyspec eval` and `tinyspec run` print an output: `NAME: DTYPE [SHAPE]` and its
  values below."""
  a = np.asarray(a)
  text = np.array2string(a, threshold=16, edgeitems=3, max_line_width=100) if a.dtype.kind != "V" else str(a.astype(np.float32))
  return f"{name}: {a.dtype} {list(a.shape)}\n  " + text.replace("\n", "\n  ")


def write_outputs(out: str, outputs: dict, trace: dict | None) -> None:
  """Outputs into DIR (DIR/NAME.npy, names sanitized: tinyspec.files) or one FILE.npz."""
  p = Path(out)
  traced = {f"node{i}": v for i, v in (trace or {}).items()}
  if p.suffix == ".npz":
    make_dir(p.parent)
    save_npz(p, {**outputs, **traced})
    return
  make_dir(p)
  for k, v in outputs.items(): save_npy(p, k, v)
  if traced: save_npz(p / "trace.npz", traced)


def eval_command(sub):
  p = sub.add_parser("eval", help="evaluate a graph file with the NumPy reference evaluator",
                     description="Evaluate a graph file with the reference evaluator. Exit 0 evaluated, 1 invalid graph or "
                                 "refused evaluation, 2 unreadable graph or input file, or bad usage.")
  p.add_argument("file", metavar="FILE")
  p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy|FILE.npz",
                 help="an input array (repeatable), named buf{slot} for a BUFFER, param{slot} for a PARAM, or the node's name")
  p.add_argument("--zeros", action="store_true",
                 help="start a BUFFER or PARAM no --input gives as zeros (without it, reading one is refused: rule eval.input, exit 2)")
  p.add_argument("--cast", action="store_true",
                 help="convert an input whose dtype is not its buffer's when every value converts exactly (without it: refused, "
                      "rule eval.input, exit 2)")
  p.add_argument("--out", "-o", metavar="DIR|FILE.npz", help="write the outputs here (default: print a summary)")
  p.add_argument("--budget", metavar="BYTES", help="memory budget, e.g. 2G; the inputs count against it (default: TINYSPEC_EVAL_BUDGET, or 1/4 of the smallest of RAM, RLIMIT_AS and the cgroup's limit)")
  p.add_argument("--trace", action="store_true", help="also write (or print) every node's value")
  p.add_argument("--level", choices=["auto", "tensor", "kernel", "program"], default="auto")
  p.add_argument("--allow-untrusted", action="store_true",
                 help="do not refuse the untrusted ops (CUSTOM, INS, CUSTOMFUNCTION: opaque code) up front; the tables give "
                      "them no semantics, so evaluating one is still refused (rule eval.untrusted)")
  p.add_argument("--strict-bounds", action="store_true",
                 help="refuse an out-of-range kernel access no gate covers (exit 1) instead of reading zero / writing nothing")
  add_option(p)

  def run(a) -> int:
    g, diags = load_file(a.file)
    if g is None or diags:
      for d in diags: print(d.format(), file=sys.stderr)
      return max((d.exit_code for d in diags), default=EXIT_UNREADABLE)
    try:
      budget = Budget(a.budget)
      inputs = read_inputs(a.input, budget.limit)
    except InputError as e:
      print(f"tinyspec eval: {e}", file=sys.stderr)
      return e.exit_code
    except EvalError as e:
      print(f"tinyspec eval: --budget: {e}", file=sys.stderr)
      return e.exit_code
    try:
      res = evaluate(g, inputs, trace=a.trace, budget=budget.limit, level=a.level, allow_untrusted=a.allow_untrusted,
                     strict_bounds=a.strict_bounds, zeros=a.zeros, cast=a.cast)
    except EvalError as e:
      if e.diagnostics:
        for d in e.diagnostics: print(d.format().replace("<graph>", a.file), file=sys.stderr)
      else:
        print(f"{a.file}: {e}", file=sys.stderr)
      return e.exit_code or EXIT_INVALID
    outputs = res.outputs if a.trace else res
    trace = res.values if a.trace else None
    if a.out:
      try: write_outputs(a.out, outputs, trace)
      except FileRefused as e:
        print(f"tinyspec eval: {e}", file=sys.stderr)
        return e.exit_code
      print(f"{a.file}: {len(outputs)} output(s) written to {a.out}")
    else:
      for k, v in outputs.items(): print(summary(k, v))
      for i, v in (trace or {}).items():
        if isinstance(v, np.ndarray): print(summary(f"node {i}", v))
    return EXIT_OK
  return p, run
