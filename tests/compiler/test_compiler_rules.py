"""Every rule of every compiler stage has a test of its own: a small program on which the
rule fires (the trace of tinyspec/rewrite.py counts it), after which every stage's graph
still validates and evaluates to the input's values (compiler/check.py check_stages).
A rule added to a stage without a witness here fails test_every_rule_has_a_witness.
The simplifier's rules have their own property test (test_compiler_rewrites.py)."""
from __future__ import annotations
import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Callable
import numpy as np
import pytest
from tinyspec.frozen import freeze, thaw
from tinyspec.rewrite import RuleSet, Trace
from tinyspec.tensor import Tensor
from tinyspec.compiler.check import check_stages
from tinyspec.compiler.device import Device, table_device
from tinyspec.compiler.pipeline import lower
from tinyspec.compiler.passes.steps import KernelRule
from tinyspec.conformance.corpus.cases import load_cases

DEVICES = {   # fixed rows (tools/render_digests.py): the same rules fire on any host
  "c": Device("c", "rules-cpu", "cpu", 2, 0, 0, False, 64, cache_bytes=32 << 20),
  "opencl": Device("opencl", "pthread-rules-cpu", "cpu", 2, 1 << 20, 4096, False, 32),
}


def _device(name: str):
  return table_device("h100") if name == "h100" else DEVICES[name]


@dataclass
class Witness:
  build: Callable           # () -> (graph, inputs)
  device: str = "c"
  opts: object = None
  patch: dict = field(default_factory=dict)   # (module, attribute) -> value, for the compile


_CASES: dict = {}


def case(cid: str) -> Callable:
  """A positive case of the corpus, with its inputs."""
  def build():
    if not _CASES: _CASES.update({c.id: c for c in load_cases()})
    c = _CASES[cid]
    from tinyspec.graph import load_file
    return load_file(c.graph)[0], c.load_inputs()
  return build


def tensors(fn, *shapes, dtype=np.float32) -> Callable:
  """fn over Tensors of small integers (exact sums in any order) of the given shapes."""
  def build():
    rng = np.random.default_rng(0)
    arrays = [rng.integers(-4, 5, s).astype(dtype) for s in shapes]
    t = fn(*[Tensor(a) for a in arrays])
    return t.graph(), t.inputs()
  return build


def gemm(a, b):
  M, K = a.shape
  return (a.reshape(M, K, 1) * b.reshape(1, K, b.shape[1])).sum(1)


def user_kernel(form: str) -> Callable:
  def build():
    import soundness_cases
    import aliasing_padding_cases
    if form == "hazard": return soundness_cases.parallel("LOOP", 16)
    if form == "alias": return aliasing_padding_cases.alias("same")
    return value_load()
  return build


def value_load():
  """out[r] = LOAD(in[r] + 1, 0, r < 2): a LOAD of a computed value, not of memory."""
  from tinyspec.refimpl.build import Builder
  b = Builder()
  out, inp = b.param((4,), "float32", 0), b.param((4,), "float32", 1)
  r = b.range(4, 0)
  v = b.ADD(b.INDEX(inp, r), b.const(1.0, "float32"))
  ld = b.LOAD(v, b.const(0.0, "float32"), b.CMPLT(r, b.const(2, "index")))
  b.SINK(b.END(b.STORE(b.INDEX(out, r), ld), r))
  return b.graph(), {"param1": np.arange(4, dtype=np.float32)}


def _pack_small():
  """render.yaml heuristics `pack_min` lowered, so that a small gemm's input is packed."""
  from tinyspec.compiler.passes import layout
  real = layout.numbers
  return {(layout, "numbers"): lambda dev: {**real(dev), "pack_min": 1}}


def one_element_kernel():
  """REDUCE/float32-kernel with its RANGE (and its input) of length 1, the element -0.0:
  the REDUCE is that element (decision reduce-one), nothing folded in."""
  g, _ = case("REDUCE/float32-kernel")()
  one = {"VCONST": ("values", [5], [1]), "CONST": ("value", 5, 1)}
  for n in g.nodes:
    key, was, now = one.get(n.op, (None, None, None))
    if key and thaw(n.arg)[key] == was: n.arg = freeze({**thaw(n.arg), key: now})
  return g, {"param0": np.array([-0.0], np.float32), "param1": np.zeros(1, np.float32)}


UPCAST = [["SPLIT", 0, [4, "UPCAST"]]]
WITNESSES = {
  "bind_param": Witness(case("CALL/float32")),
  "inline_call": Witness(case("CALL/float32")),
  "gettuple": Witness(case("GETTUPLE/float32")),
  "masked_read": Witness(case("PAD/float32")),
  "redirect_reads": Witness(user_kernel("hazard")),
  "separate_reads": Witness(user_kernel("hazard")),
  "separate_aliases": Witness(user_kernel("alias")),
  "retype": Witness(case("STACK/bool")),
  "split_range": Witness(tensors(lambda a, b: a + b, (64,), (64,)), opts=UPCAST),
  "split_closer": Witness(tensors(lambda a, b: a + b, (64,), (64,)), opts=UPCAST),
  "pad_range": Witness(tensors(gemm, (100, 24), (24, 100))),
  "pad_mask": Witness(tensors(gemm, (100, 24), (24, 100))),
  "split_reduce": Witness(tensors(lambda a: a.sum(), (1 << 18,)), "opencl"),
  "pack_inputs": Witness(tensors(gemm, (64, 64), (64, 64)), patch=None),
  "packed_read": Witness(tensors(gemm, (64, 64), (64, 64)), patch=None),
  "pad_output": Witness(tensors(gemm, (100, 24), (24, 100))),
  "padded_input": Witness(tensors(gemm, (100, 24), (24, 100))),
  "ungated_store": Witness(tensors(gemm, (100, 24), (24, 100))),
  "max_on_integers": Witness(case("REDUCE/float32-max")),
  "one_element": Witness(one_element_kernel),
  "vector_lanes": Witness(tensors(lambda a, b: a + b, (64,), (64,)), opts=UPCAST),
  "vector_end": Witness(tensors(lambda a, b: a + b, (64,), (64,)), opts=UPCAST),
  "unroll": Witness(tensors(lambda a: a.sum(), (64,)), opts=[["SPLIT", 0, [4, "UNROLL"]]]),
  "group_reduce": Witness(tensors(lambda a: a.sum(), (4096,)), "h100"),
  "accumulate": Witness(case("REDUCE/float32")),
  "split_end": Witness(case("PERMUTE/float32")),
  "step_barrier": Witness(tensors(gemm, (64, 64), (64, 64)), "h100"),
  "gate_store": Witness(case("CONTIGUOUS/bool-empty")),
  "gate_load": Witness(case("PAD/bool-empty")),
  "gate_read": Witness(case("EXP2/float16-empty")),
  "load_of_value": Witness(user_kernel("value")),
  "retag": Witness(tensors(lambda a, b: gemm(a.cast("float32"), b.cast("float32")), (16, 16), (16, 16), dtype=np.int16)),   # bounded products: fused
}
for _name in ("pack_inputs", "packed_read"): WITNESSES[_name] = replace(WITNESSES[_name], patch=_pack_small)


def compiler_rules() -> set[str]:
  """The name of every rule in the compiler's rule sets and schedule rules (not the simplifier's)."""
  import tinyspec.compiler as C
  from tinyspec.compiler.analysis import symbolic
  names = set()
  for m in pkgutil.walk_packages(C.__path__, "tinyspec.compiler."):
    if ".runtime" in m.name: continue
    mod = importlib.import_module(m.name)
    for v in vars(mod).values():
      items = v if isinstance(v, tuple) else (v,)
      for x in items:
        if isinstance(x, RuleSet): names |= {r.name for r in x.rules}
        elif isinstance(x, KernelRule): names.add(x.name)
        elif hasattr(x, "rules") and isinstance(x.rules, RuleSet): names |= {r.name for r in x.rules.rules}
  return names - {r.name for r in symbolic.RULES.rules}


def test_every_rule_has_a_witness():
  assert compiler_rules() == set(WITNESSES)


@pytest.mark.parametrize("rule", sorted(WITNESSES))
def test_the_rule_fires_and_every_stage_still_evaluates(rule, monkeypatch):
  w = WITNESSES[rule]
  for (mod, attr), value in (w.patch() if callable(w.patch) else w.patch).items(): monkeypatch.setattr(mod, attr, value)
  g, inputs = w.build()
  dev = _device(w.device)
  trace = Trace()
  c = lower(g, dev.target, w.opts, device=dev, trace=trace)
  assert trace.times(rule) > 0, f"{rule} did not fire: {sorted(trace.by_stage().items())}"
  check_stages(g, inputs, dev.target, compiled=c)


def _identity_one(x, ctx, rewrite, orig):
  """accumulate with every accumulator starting at the wrong value (1 for ADD)."""
  from tinyspec.compiler.passes import accumulate as A
  out = A.accumulate(x, ctx, rewrite, orig)
  from tinyspec.rewrite import substitute
  from tinyspec.compiler.literals import const
  from tinyspec.uop import toposort
  inits = {u: u.replace(src=(u.src[0], const(1.0, "float32"))) for u in toposort(out) if u.op == "STORE" and u.src[1].op == "CONST" and u.src[1].arg["value"] == 0.0}
  return substitute(out, inits) if inits else out


def _drop_lanes(x):
  """vector_end that closes nothing: the lanes' END goes, and so does its loop's body order."""
  return x.src[0] if any(s.op == "VCONST" for s in x.src[1:]) else None


@pytest.mark.parametrize("rule,module,planted", [("accumulate", "accumulate", _identity_one), ("vector_end", "expand", _drop_lanes)])
def test_a_planted_wrong_rule_fails_its_test(rule, module, planted, monkeypatch):
  """The per-rule test is an adversary: the rule made wrong is caught (a stage's values
  differ, or the stage graph is refused)."""
  from tinyspec.rewrite import Rule
  mod = importlib.import_module(f"tinyspec.compiler.passes.{module}")
  for rs in [v for v in vars(mod).values() if isinstance(v, RuleSet)] + [v.rules for v in vars(mod).values() if hasattr(v, "rules") and isinstance(v.rules, RuleSet)]:
    monkeypatch.setattr(rs, "rules", [Rule(r.name, r.pat, planted) if r.name == rule else r for r in rs.rules])
    rs.by_op.clear()
  from tinyspec.compiler.check import StageMismatch
  from tinyspec.compiler.errors import CompileError
  with pytest.raises((StageMismatch, CompileError)) as e:
    test_the_rule_fires_and_every_stage_still_evaluates(rule, monkeypatch)
  assert "stage" in str(e.value) or e.value.rule.startswith("compile.")
  for rs in [v for v in vars(mod).values() if isinstance(v, RuleSet)]: rs.by_op.clear()
