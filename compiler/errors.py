"""The compiler's refusal: a graph it does not compile, named by a rule id."""
from __future__ import annotations


class CompileError(Exception):
  """A graph the compiler refuses: `rule` is a rule id (spec/render.yaml `rules`, or a
  validator rule), `node` the offending UOp when there is one."""
  def __init__(self, rule: str, msg: str, node=None):
    super().__init__(f"{msg} [{rule}]")
    self.rule, self.msg, self.node = rule, msg, node
