"""Diagnostics: one broken rule at one node, printed as `FILE: node N (OP): message [rule]`.

Exit codes (documented in the README and `tinyspec --help`):
  0  valid / success
  1  the graph is invalid (a rule is broken) or a run failed
  2  the file cannot be read or parsed, or the command line is wrong
"""
from __future__ import annotations
from dataclasses import dataclass
import difflib
from tinyspec.files import printable
from tinyspec.limits import limits

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


def did_you_mean(word, choices) -> str:
  """" (did you mean 'x'?)" for the choice closest to a misspelled word, or "" when none is
  close (difflib's ratio >= 0.6); only short strings are compared (a message stays short)."""
  if not isinstance(word, str) or len(word) > 64: return ""
  folded = {c.lower(): c for c in choices if isinstance(c, str)}   # 'Float32', 'neg' find their names
  close = difflib.get_close_matches(word.lower(), folded, n=3)
  if not close: return ""
  # difflib's ratio ties on a swap of two letters ('agr' is as close to 'tag' as to 'arg'): prefer same letters
  best = min(close, key=lambda c: (sorted(c) != sorted(word.lower()), close.index(c)))
  return f" (did you mean {folded[best]!r}?)"


@dataclass
class Diagnostic:
  file: str
  node: int | None
  op: str | None
  rule: str
  message: str
  exit_code: int = EXIT_INVALID
  omitted: int = 0    # > 0: this one only says how many more were left out (Capped)

  @property
  def fatal(self) -> bool:
    """Structural: the graph cannot be built at all."""
    return self.rule.startswith("file.")

  def format(self) -> str:
    """The line to print; control characters of the file name or message are escaped."""
    where = f"{self.file}: "
    if self.node is not None: where += f"node {self.node}" + (f" ({self.op})" if self.op else "") + ": "
    return printable(f"{where}{self.message} [{self.rule}]")

  def to_json(self) -> dict:
    return {"file": self.file, "node": self.node, "op": self.op, "rule": self.rule, "message": self.message}


class Capped(list):
  """Diagnostics up to `cap` (limits.max_diagnostics); past it they are only counted, and
  close() adds one last diagnostic that says how many were left out. A file of two
  million broken nodes then costs two hundred Diagnostic objects, not two million."""

  def __init__(self, cap: int, items=()):
    super().__init__(items)
    self.cap, self.dropped = cap, 0

  def add(self, d: Diagnostic) -> None:
    if len(self) < self.cap: self.append(d)
    else: self.dropped += 1

  def close(self, file: str) -> "Capped":
    if len(self) > self.cap:
      self.dropped += len(self) - self.cap
      del self[self.cap:]
    if self.dropped:
      self.append(Diagnostic(file, None, None, "file.limit", f"... and {self.dropped:,} more errors not reported "
                                                             f"(limits.max_diagnostics = {self.cap})", omitted=self.dropped))
      self.dropped = 0
    return self

  @staticmethod
  def merge(file: str, cap: int, *lists) -> "Capped":
    """Several capped lists as one, capped again (their summaries added up)."""
    out = Capped(cap)
    for ds in lists:
      for d in ds:
        if d.omitted: out.dropped += d.omitted
        else: out.add(d)
    return out.close(file)


def max_diagnostics() -> int:
  return limits().max_diagnostics
