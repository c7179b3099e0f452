"""The compiler's refusal: a graph it does not compile, named by a rule id."""
from __future__ import annotations
from tinyspec.props import DerivationError


class CompileError(Exception):
  """A graph the compiler refuses: `rule` is a rule id (spec/render.yaml `rules`, or a
  validator rule), `node` the offending UOp when there is one."""
  def __init__(self, rule: str, msg: str, node=None):
    super().__init__(f"{msg} [{rule}]")
    self.rule, self.msg, self.node = rule, msg, node


# What a stage refuses a kernel with: its own CompileError, or a node it built whose
# properties the derivation refuses (tinyspec.props, DerivationError naming node, op, rule).
REFUSED = (CompileError, DerivationError)


def refusal(e: DerivationError) -> CompileError:
  """The derivation's refusal as the compiler's: the same message, rule and node."""
  d = e.diagnostics[0]
  return CompileError(d.rule, d.message, e.node)
