"""Diagnostics: one broken rule at one node, printed as `FILE: node N (OP): message [rule]`.

Exit codes (documented in the README and `tinyspec --help`):
  0  valid / success
  1  the graph is invalid (a rule is broken) or a run failed
  2  the file cannot be read or parsed, or the command line is wrong
"""
from __future__ import annotations
from dataclasses import dataclass

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


@dataclass
class Diagnostic:
  file: str
  node: int | None
  op: str | None
  rule: str
  message: str
  exit_code: int = EXIT_INVALID

  @property
  def fatal(self) -> bool:
    """Structural: the graph cannot be built at all."""
    return self.rule.startswith("file.")

  def format(self) -> str:
    where = f"{self.file}: "
    if self.node is not None: where += f"node {self.node}" + (f" ({self.op})" if self.op else "") + ": "
    return f"{where}{self.message} [{self.rule}]"

  def to_json(self) -> dict:
    return {"file": self.file, "node": self.node, "op": self.op, "rule": self.rule, "message": self.message}
