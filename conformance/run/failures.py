"""What a failure says, in the terminal, in pytest and in the reports.

A failing case's message is the comparison (the first differing elements, got and
expected; a float with its bits in hex and the two's distance in ulps) followed by lines
that make it stand alone:

  out0: 3 of 64 elements differ; at (5,): got 0.99951171875 (0x3bff), expected 1.0 (0x3c00), 1 ulp apart (bit-exact); ...
    operands of element (5,): buf0[5] = 1.0 (0x3c00), buf1[5] = -6.103515625e-05 (0x8400)
    profile: strict
    first divergent node: ...
    repro: tinyspec run --backend mine --case ADD/float32

The repro command judges the case alone as the runner does (conformance/run/repro.py). Case
paths are relative: an id for the shipped corpus, else the folder relative to the current
directory where it is inside it.

`Terminal` prints results as a run goes: each failure once, a message that repeats
(a backend that cannot start gives every case the same error) only the first time, and at
the end a closing list of the failing ids, repeated messages grouped.
"""
from __future__ import annotations
import os
import re
import shlex
from pathlib import Path
import numpy as np
from tinyspec.conformance.corpus.cases import load_array, CASES_DIR
from tinyspec.conformance.run.compare import show_value
from tinyspec.files import printable

BAD = ("fail", "error", "xpass")   # the statuses the closing list names (runner.UNEXPECTED)


# ------------------------------------------------------------------ operands at the differing elements
def first_positions(message: str, limit: int = 3) -> list[tuple]:
  """The element positions a comparison message names (`at (24,)`, `at (0, 3)`)."""
  out = []
  for m in re.finditer(r"\bat \(([\d, ]*)\)", message):
    out.append(tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x))
    if len(out) == limit: break
  return out


def operands_at(case, pos: tuple, out_shape: tuple | None = None) -> list[str]:
  """What each input holds at an output position it reaches per element (broadcast from
  the right). With the output's shape, only inputs that broadcast to it elementwise are
  named (a reduction's or a permutation's input has no one element there); without it,
  inputs of another rank or of a smaller extent are left out."""
  lines = []
  for name, (path, dt) in sorted(case.inputs.items()):
    try: x = np.asarray(load_array(path, dt))
    except Exception: continue   # an unreadable input: the message has said why the case failed
    if 0 in x.shape or x.ndim > len(pos): continue
    dims = list(zip(x.shape, pos[len(pos) - x.ndim:]))
    if out_shape is not None:
      if len(out_shape) != len(pos) or any(d not in (1, o) for d, o in zip(x.shape, out_shape[len(out_shape) - x.ndim:])): continue
    elif any(d != 1 and p >= d for d, p in dims): continue
    idx = tuple(p if d > 1 else 0 for d, p in dims)
    lines.append(f"{name}[{', '.join(map(str, idx))}] = {show_value(x[idx], True)}")
  return lines


def operand_lines(case, message: str) -> list[str]:
  """`operands of element (5,): buf0[5] = 1.0, buf1[5] = 2.0` for the first differing
  elements the message names (of the output it names first)."""
  out_shape = None
  m = re.match(r"(\w+): ", message)
  o = case.outputs.get(m.group(1)) if m else None
  if o is not None:
    try:
      out_shape = tuple(load_array(o.file, o.dtype).shape)
    except Exception: out_shape = None
  lines = []
  for pos in first_positions(message):
    vals = operands_at(case, pos, out_shape)
    if vals: lines.append(f"operands of element {_tuple(pos)}: {', '.join(vals)}")
  return lines


def _tuple(pos: tuple) -> str:
  return "(" + ", ".join(map(str, pos)) + ("," if len(pos) == 1 else "") + ")"


# ------------------------------------------------------------------ reproducing one case
def case_arg(case) -> str:
  """How a command names the case: its id when it is in the shipped corpus, else its folder
  (relative to the current directory when inside it)."""
  d = Path(case.dir).resolve()
  try:
    if d.relative_to(CASES_DIR).as_posix() == case.id: return case.id
  except ValueError: pass
  try: return os.path.relpath(d) if d.is_relative_to(Path.cwd()) else str(d)
  except (OSError, ValueError): return str(d)


def repro_command(case, backend: str | None, profile: str | None = None, verify: bool = True) -> str:
  """The one-line shell command that judges `case` alone on `backend` as the runner did
  (`tinyspec run --case`), quoted for a POSIX shell; backend None: the one the project's
  [tool.tinyspec] names (which `tinyspec run` reads too)."""
  args = ["tinyspec", "run"] + (["--backend", backend] if backend else []) + ["--case", case_arg(case)]
  if profile: args += ["--profile", profile]
  if not verify: args.append("--no-verify")
  return shlex.join(args)


def explain(case, message: str, backend: str, profile: str, explicit_profile: bool = False, verify: bool = True) -> str:
  """A failing positive case's message made to stand alone: after its first line (the
  comparison) the operands at the first differing elements, then what followed it (the
  first divergent node), the profile it was judged by and the repro command."""
  head, _, rest = message.partition("\n")
  lines = operand_lines(case, head) + [x.strip() for x in rest.splitlines() if x.strip()] + [f"profile: {profile}"]
  lines.append("repro: " + repro_command(case, backend, profile if explicit_profile else None, verify))
  return head + "".join("\n  " + x for x in lines)


def corpus_of(case) -> Path | None:
  """The corpus folder a case was read from (its folder less its id), or None."""
  d, parts = Path(case.dir), case.id.split("/")
  return d.parents[len(parts) - 1] if len(d.parts) > len(parts) and d.parts[-len(parts):] == tuple(parts) else None


def relative_to_corpus(message: str, case) -> str:
  """The message with the paths into the case's corpus written relative to it
  (`ADD/float32/graph.json`, not a path into site-packages)."""
  root = corpus_of(case)
  if root is None or not message: return message
  for form in dict.fromkeys((str(root.resolve()), str(root))): message = message.replace(form + os.sep, "")
  return message


# ------------------------------------------------------------------ the terminal
def _key(r) -> str:
  """A result's message without what names its case: identical keys are one message."""
  lines = [x for x in r.message.splitlines() if not x.strip().startswith(("repro:", "first divergent node:"))]
  return r.status + "\0" + "\n".join(lines).replace(r.case, "{case}")


class Terminal:
  """Prints results as they come (`show`), each repeated message once, and the closing
  list (`closing`)."""

  def __init__(self, verbose: bool = False, write=print):
    self.verbose, self.write = verbose, write
    self.first: dict = {}   # message key -> the first result that had it
    self.bad: list = []     # unexpected results, in order
    self.corpus = None      # the corpus folder the case paths in messages are relative to

  def show(self, r) -> None:
    if r.status not in BAD:
      if self.verbose: self.write(printable(f"{r.status.upper():5s} {r.backend} {r.case}" + (f": {r.message}" if r.message else "")))
      return
    self.bad.append(r)
    k = (r.backend, _key(r))
    first = self.first.setdefault(k, r)
    if first is not r:
      if self.verbose: self.write(printable(f"{r.status.upper():5s} {r.backend} {r.case}: the same {r.status} as {first.case}"))
      return
    self.write(printable(f"{r.status.upper():5s} {r.backend} {r.case}" + (f": {r.message}" if r.message else "")))

  def closing(self, rerun: str | None = None, limit: int = 60) -> list[str]:
    """The failing ids, one a line, a repeated message's cases on one line; then the
    command that runs just them again (`rerun` is that command's start: `tinyspec
    conformance --backend NAME`; left out when there are many)."""
    if not self.bad: return []
    groups: dict = {}
    for r in self.bad: groups.setdefault((r.backend, _key(r)), []).append(r)
    lines = [f"failing cases ({len(self.bad)}" + (f", in the corpus {self.corpus}" if self.corpus else "") + "):"]
    for n, rs in enumerate(groups.values()):
      if n == limit:
        lines.append(f"  ... and {len(groups) - limit} more (--json FILE lists every result)"); break
      r0 = rs[0]
      head = f"  {r0.status.upper():5s} {r0.backend} {r0.case}"
      if len(rs) > 1:
        more = ", ".join(r.case for r in rs[1:9]) + (f" and {len(rs) - 9} more" if len(rs) > 9 else "")
        head += f" and {len(rs) - 1} more with the same message (shown above once): {more}"
      lines.append(head)
    ids = list(dict.fromkeys(r.case for r in self.bad))
    if rerun and len(ids) <= 12: lines.append("rerun them: " + rerun + "".join(f" --case {shlex.quote(i)}" for i in ids))
    return [printable(x) for x in lines]
