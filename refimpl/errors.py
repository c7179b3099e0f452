"""The one exception the evaluator raises for refused graphs and bad inputs."""
from __future__ import annotations


class EvalError(Exception):
  """Evaluation refused or failed. `node`/`op`/`rule` say where and why (any may be None);
  `diagnostics` carries the validator's findings when the graph is invalid."""

  def __init__(self, message: str, node: int | None = None, op: str | None = None, rule: str | None = None,
               diagnostics: list | None = None, exit_code: int = 1):
    where = ""
    if node is not None: where = f"node {node}" + (f" ({op})" if op else "") + ": "
    elif op: where = f"{op}: "
    tag = f"[{rule}]" if rule else ""
    # a message built from a diagnostic or a FileRefused already ends with its rule id: once is enough
    super().__init__(where + message + (f" {tag}" if tag and tag not in message else ""))
    self.node, self.op, self.rule = node, op, rule
    self.diagnostics = list(diagnostics or [])
    self.exit_code = exit_code
