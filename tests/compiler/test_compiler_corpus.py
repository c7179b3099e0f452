"""`tinyspec compile` on every graph of the conformance corpus either succeeds -- and the
source it prints builds with the target's compiler -- or refuses with a rule id that a
catalogue defines (the validator's in ops.yaml, the compiler's in render.yaml). It never
crashes and never prints source that fails to build."""
from __future__ import annotations
import pytest
from tinyspec.conformance.corpus.rulecases import load_rule_cases
from tinyspec.graph import load_file
from tinyspec.tables import tables
from tinyspec.compiler import compile_graph, CompileError
from tinyspec.compiler.rendertables import render_tables

from targets import TARGETS


def corpus_graphs():
  out = []
  for c in load_rule_cases():
    if not c.input.exists(): continue
    g, diags = load_file(c.input)
    if g is None or any(d.fatal for d in diags): continue
    out.append((c, g))
  return out


def build_all(kernels, target):
  """Build every kernel in one program (a build costs far more than its size; each
  kernel carries its own helper list, so sharing a unit hides nothing): each
  kernel's function is renamed g<n>_<name> so that names stay unique."""
  from dataclasses import replace
  from tinyspec.compiler.render import assemble
  renamed = [replace(k, name=f"g{n}_{k.name}", body=k.body.replace(f" {k.name}(", f" g{n}_{k.name}(", 1)) for n, k in enumerate(kernels)]
  src = assemble(renamed, target)
  if target == "c":
    from tinyspec.compiler.runtime.c import load
    lib = load(src)
    for k in renamed: getattr(lib, k.name)
  else:
    from tinyspec.compiler.runtime.opencl import Built
    prg = Built(src).prg
    for k in renamed: getattr(prg, k.name)


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_compiles_or_is_refused_with_a_rule(target):
  known = tables().rule_ids() | set(render_tables()["rules"])
  compiled = refused = 0
  kernels = []
  for case, g in corpus_graphs():
    try:
      kernels += compile_graph(g, target, keep_stages=False).sources
      compiled += 1
      assert case.valid, f"{case.id}: an invalid graph compiled"
    except CompileError as e:
      refused += 1
      assert e.rule in known, f"{case.id}: refused with unknown rule {e.rule!r}"
      if not case.valid and case.expect_rule: assert e.rule == case.expect_rule, case.id   # the validator's verdict, unchanged
  assert compiled > 80 and refused > 50, (compiled, refused)
  build_all(kernels, target)      # every rendered kernel builds with the target's compiler
