"""Writes the rule corpus conformance/rules/ (layout: conformance/rules/README.md).

For every rule id of the tables, graphs that break exactly that rule (with the node and
rule id a validator must report) and valid graphs that exercise it; for every op, its
`example:` from spec/ops.yaml. The files are committed data that any validator can be run
against; this script only saves writing them by hand. Each case is a few lines below,
built with `G` (a node-list builder that hands back node indices, so the expected node
is the index of the node the case means to break).

  .venv/bin/python tools/gen_rule_cases.py            # rewrite conformance/rules/
  .venv/bin/python tools/gen_rule_cases.py --check    # exit 1 if the files are stale
"""
from __future__ import annotations
import argparse
import json
import sys
import tempfile
from pathlib import Path
if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()

ROOT = Path(__file__).resolve().parent.parent
from tinyspec.tables import tables   # noqa: E402

OUT = ROOT / "conformance" / "rules"
README = "README.md"   # hand-written, kept by the generator


# ------------------------------------------------------------------ building graphs
class G:
  """A node list under construction; every method returns the new node's index."""
  def __init__(self, level: str | None = None):
    self.nodes: list[dict] = []
    self.level, self.roots = level, None

  def add(self, op, src=(), arg=None, **fields) -> int:
    n: dict = {"op": op}
    if src: n["src"] = list(src)
    if arg is not None: n["arg"] = arg
    n.update(fields)
    self.nodes.append(n)
    return len(self.nodes) - 1

  def const(self, value, dtype="float32") -> int: return self.add("CONST", arg={"value": value, "dtype": dtype})
  def shape(self, *dims) -> int: return self.add("VCONST", arg={"values": list(dims), "dtype": "index"})

  def buffer(self, dims, dtype="float32", device="CPU", slot=None, **extra) -> int:
    s = self.shape(*dims)
    slot = sum(1 for n in self.nodes if n["op"] == "BUFFER") if slot is None else slot
    return self.add("BUFFER", [s], {"slot": slot, "dtype": dtype, "device": device, **extra})

  def param(self, dims, dtype="float32", slot=0, **extra) -> int:
    return self.add("PARAM", [self.shape(*dims)], {"slot": slot, "dtype": dtype, **extra})

  def document(self) -> dict:
    d: dict = {"format": "tinyspec-graph", "version": 1}
    if self.level: d["level"] = self.level
    if self.roots is not None: d["roots"] = self.roots
    d["nodes"] = self.nodes
    return d


def kernel_store(g: G, value: int | None = None, dtype="float32", n=4) -> int:
  """A kernel body: STORE value (default 1) into PARAM 0 at every index of a RANGE loop;
  returns the SINK."""
  p = g.param([n], dtype)
  r = g.add("RANGE", [g.const(n, "index")], {"id": 0, "type": "LOOP"})
  st = g.add("STORE", [g.add("INDEX", [p, r]), g.const(1.0 if dtype.startswith("float") else 1, dtype) if value is None else value])
  return g.add("SINK", [g.add("END", [st, r])])


# ------------------------------------------------------------------ cases
class Case:
  def __init__(self, name: str, valid: bool, doc=None, raw: bytes | None = None, ext="json", node=None, rule=None,
               exit=None, level=None, description="", missing=False):
    self.name, self.valid, self.doc, self.raw, self.ext = name, valid, doc, raw, ext
    self.node, self.rule, self.level, self.description, self.missing = node, rule, level, description, missing
    self.exit = exit if exit is not None else (0 if valid else 1)


def valid(name, g: G, description="", level=None) -> Case:
  return Case("valid-" + name, True, g.document(), description=description, level=level)


def invalid(name, g: G, node, description="", rule=None, level=None) -> Case:
  return Case("invalid-" + name, False, g.document(), node=node, rule=rule, description=description, level=level)


def raw(name, data: bytes, valid_: bool, ext="json", exit=None, description="") -> Case:
  return Case(("valid-" if valid_ else "invalid-") + name, valid_, raw=data, ext=ext, exit=exit, description=description)


CASES: dict[str, callable] = {}


def rule(rule_id):
  def deco(fn): CASES[rule_id] = fn; return fn
  return deco


def simple_graph() -> G:
  g = G(); a = g.const(1, "int32"); g.add("ADD", [a, g.const(2, "int32")]); return g


# -- file and graph structure
@rule("file.read")
def _():
  yield Case("invalid-missing", False, missing=True, exit=2, description="the input file does not exist")
  yield valid("readable", simple_graph(), "a file that can be read")


@rule("file.parse")
def _():
  yield raw("truncated", b'{"format": "tinyspec-graph", "version": 1, "nodes": [{"op": "CONST", "arg": {"value": 1', False, exit=2, description="JSON cut off in the middle")
  yield raw("not-text", bytes(range(256)), False, ext="bin", exit=2, description="binary garbage, not UTF-8")
  yield raw("python-tag", b"!!python/object/apply:os.system [echo unsafe]\n", False, ext="yaml", exit=2, description="YAML with a Python tag (only safe, JSON-like YAML is read)")
  yield raw("yaml-alias", b"- &c {op: CONST, arg: {value: 1, dtype: int32}}\n- *c\n", False, ext="yaml", exit=2, description="YAML aliases are not JSON data")
  yield raw("nan-literal", b'[{"op": "CONST", "arg": {"value": NaN, "dtype": "float32"}}]', False, exit=2, description='NaN is not JSON; write "nan"')
  yield raw("empty", b"", False, exit=2, description="an empty file")
  yield raw("deep-nesting", b"[" * 100_000, False, exit=2, description="nesting deeper than any parser stack")
  yield raw("yaml", b"# a graph written in YAML\n- {op: CONST, arg: {value: 1.5, dtype: float32}}\n- {op: CONST, arg: {value: .inf, dtype: float32}}\n"
                     b"- {op: ADD, src: [0, 1]}\n", True, ext="yaml", description="plain YAML is read (.inf becomes \"inf\")")
  yield raw("specials", b'[{"op": "CONST", "arg": {"value": "nan", "dtype": "float32"}}, {"op": "CONST", "arg": {"value": -0.0, "dtype": "float32"}}, '
                        b'{"op": "MAX", "src": [0, 1]}]', True, description='float specials as strings, -0.0 as plain JSON')


@rule("file.limit")
def _():
  yield raw("long-integer", b'[{"op": "CONST", "arg": {"value": 1' + b"0" * 400 + b', "dtype": "float64"}}]', False, exit=2,
            description="an integer of 401 digits (limits.max_int_digits = 400)")
  c = raw("deep-arg", b'[{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}, {"op": "NEG", "src": [0], "tag": ' + b"[" * 65 + b"]" * 65 + b"}]",
          False, exit=2, description="a tag nested 65 deep (limits.max_nesting = 64)")
  c.node = 1; yield c
  yield raw("at-the-limits", b'[{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}, "tag": {"n": 1' + b"0" * 399 + b', "deep": '
            + b"[" * 63 + b"]" * 63 + b"}}]", True, description="an integer of 400 digits and a tag nested 64 deep")


@rule("file.schema")
def _():
  yield raw("empty-nodes", b'{"format": "tinyspec-graph", "version": 1, "nodes": []}', False, description="a graph has at least one node")
  yield raw("not-a-graph", b'"hello"', False, description="the document is neither an object nor a node list")
  yield raw("unknown-top-field", b'{"nodes": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}], "edges": []}', False, description="an unknown top-level field")
  yield raw("wrong-version", b'{"version": 2, "nodes": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}]}', False, description="version 2 is not this format")
  c = raw("src-not-indices", b'[{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}, {"op": "NEG", "src": ["0"]}]', False, description="src must hold node indices")
  c.node = 1; yield c
  c = raw("unknown-node-field", b'[{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}, "srcs": []}]', False, description="an unknown node field")
  c.node = 0; yield c
  c = raw("op-lower-case", b'[{"op": "const", "arg": {"value": 1, "dtype": "int32"}}]', False, description="op names are upper case")
  c.node = 0; yield c
  g = G(level="tensor"); b = g.buffer([2, 3]); a = g.add("ADD", [b, g.const(1.0)], dtype="float32", shape=[2, 3], name="y", tag={"note": "any JSON"})
  g.roots = [a]
  d = g.document(); d["meta"] = {"source": "gen_rule_cases"}
  yield Case("valid-every-field", True, d, description="every optional document and node field")


@rule("graph.unknown_op")
def _():
  g = G(); a = g.const(1, "int32"); n = g.add("FROBNICATE", [a])
  yield invalid("frobnicate", g, n, "an op that is not in the tables")
  yield valid("known", simple_graph())


@rule("graph.src")
def _():
  g = G(); n = g.add("NEG", [1]); g.const(1, "int32")
  yield invalid("forward", g, n, "a source after the node")
  g = G(); g.const(1, "int32"); n = g.add("ADD", [0, 1])
  yield invalid("self", g, n, "a node that is its own source (a cycle)")
  g = G(); g.const(1, "int32"); n = g.add("NEG", [99])
  yield invalid("out-of-range", g, n, "a source index past the end")
  g = G(); g.const(1, "int32"); g.roots = [3]
  yield invalid("root-out-of-range", g, None, "a root index past the end")
  g = G(); a = g.const(2, "int32"); m = g.add("MUL", [a, a]); s = g.add("ADD", [m, a]); g.roots = [m, s]
  yield valid("shared-and-roots", g, "a node used twice, two roots")


@rule("graph.arity")
def _():
  g = G(); a = g.const(1, "int32"); n = g.add("ADD", [a])
  yield invalid("add-one-source", g, n, "ADD takes (A, B)")
  g = G(); a = g.const(1, "int32"); n = g.add("CONST", [a], {"value": 2, "dtype": "int32"})
  yield invalid("const-with-source", g, n, "CONST takes no sources")
  g = G(); n = g.add("STACK")
  yield invalid("stack-empty", g, n, "STACK takes at least one source")
  g = G(); b = g.buffer([3]); alt = g.buffer([3]); gate = g.const(True, "bool"); g.add("LOAD", [b, alt, gate])
  yield valid("optional-slots", g, "LOAD with its optional alt and gate")


@rule("arg.schema")
def _():
  g = G(); n = g.add("CONST", arg={"value": 1})
  yield invalid("const-no-dtype", g, n, "CONST needs a dtype")
  g = G(); s = g.shape(3); n = g.add("BUFFER", [s], {"slot": -1, "dtype": "float32", "device": "CPU"})
  yield invalid("negative-slot", g, n, "a slot is a non-negative integer")
  g = G(); n = g.add("BINARY", arg={"data": "not base64!"})
  yield invalid("binary-not-base64", g, n, "BINARY data must be base64")
  g = G(); b = g.buffer([2]); n = g.add("REDUCE", [b], {"op": "MIN", "axes": [0]})
  yield invalid("reduce-op", g, n, "REDUCE reduces with ADD, MAX or MUL")
  g = G(); g.add("BINARY", arg={"data": "AAEC"}); g.const("-inf", "float32")
  yield valid("args", g)


@rule("slot.kind")
def _():
  g = G(); b = g.buffer([3]); s = g.add("STORE", [b, g.buffer([3])]); n = g.add("NEG", [s])
  yield invalid("void-as-value", g, n, "a side effect used as a value")
  g = G(); t = g.add("TUPLE", [g.const(1.0)]); n = g.add("NEG", [t])
  yield invalid("tuple-as-value", g, n, "a tuple used as a value")
  g = G(); p = g.param([4]); r = g.add("RANGE", [g.const(4, "index")], {"id": 0})
  st = g.add("STORE", [g.add("INDEX", [p, r]), g.const(1.0)]); n = g.add("END", [st, g.const(4, "index")]); g.add("SINK", [n])
  yield invalid("end-of-non-range", g, n, "END closes RANGEs only")
  g = G(); n = g.add("GROUP", [g.const(1.0)])
  yield invalid("group-of-value", g, n, "GROUP merges side effects only")
  g = G(); kernel_store(g)
  yield valid("range-and-void", g, "END over a RANGE, SINK over side effects")


@rule("shape.operand")
def _():
  g = G(); b = g.buffer([6]); s = g.add("VCONST", arg={"values": [2, 3], "dtype": "int32"}); n = g.add("RESHAPE", [b, s])
  yield invalid("int32-shape", g, n, "shape operands have dtype index")
  g = G(); b = g.buffer([6]); s = g.add("PARAM", [g.shape()], {"slot": 0, "dtype": "index"}); n = g.add("RESHAPE", [b, s])
  yield invalid("not-constant", g, n, "a shape operand must be a constant")
  g = G(); s = g.shape(-1, 6); n = g.add("BUFFER", [s], {"slot": 0, "dtype": "float32", "device": "CPU"})
  yield invalid("negative-dim", g, n, "dims are non-negative")
  g = G(); s = g.add("STACK", [g.const(2, "index"), g.const(3, "index")]); b = g.add("BUFFER", [s], {"slot": 0, "dtype": "float32", "device": "CPU"})
  g.add("RESHAPE", [b, g.const(6, "index")])
  yield valid("stack-and-scalar", g, "a STACK of index CONSTs, and a ()-shaped index CONST meaning (6,)")


@rule("shape.limit")
def _():
  g = G(); b = g.buffer([1000000, 1000000, 1000])
  yield invalid("1e15-elements", g, b, "a shape of 10^15 elements")
  g = G(); g.buffer([1 << 20, 1 << 20])
  yield valid("at-the-limit", g, "exactly limits.max_numel = 2^40 elements")
  g = G(); b = g.buffer([1] * 65)
  yield invalid("rank-65", g, b, "a shape of 65 dims (limits.max_rank = 64)")
  g = G(); g.buffer([1] * 64)
  yield valid("rank-64", g, "exactly limits.max_rank = 64 dims")


@rule("shape.broadcast")
def _():
  g = G(); n = g.add("ADD", [g.buffer([2, 3]), g.buffer([4])])
  yield invalid("2x3-and-4", g, n, "right-aligned dims 3 and 4 differ")
  g = G(); n = g.add("WHERE", [g.buffer([2], "bool"), g.buffer([3]), g.buffer([3])])
  yield invalid("where-condition", g, n, "the condition broadcasts too")
  g = G(); g.add("ADD", [g.buffer([2, 1]), g.buffer([3])])
  yield valid("2x1-and-3", g, "(2, 1) and (3,) broadcast to (2, 3)")


@rule("dtype.allowed")
def _():
  g = G(); n = g.add("AND", [g.const(1.0), g.const(2.0)])
  yield invalid("and-float", g, n, "AND takes bool or integer dtypes")
  g = G(); n = g.add("RECIP", [g.const(2, "int32")])
  yield invalid("recip-int", g, n, "RECIP takes floats")
  g = G(); n = g.add("REDUCE", [g.buffer([3], "bool")], {"op": "ADD", "axes": [0]})
  yield invalid("reduce-add-bool", g, n, "ADD reduces numbers (an op check reusing the rule id)")
  g = G(); n = g.add("WHERE", [g.const(1.0), g.const(1, "int8"), g.const(2, "int8")])
  yield invalid("where-float-condition", g, n, "WHERE's condition is a bool (decision where-cond, as tinygrad 0.14 requires)")
  g = G(); _a = g.add("AND", [g.const(True, "bool"), g.const(False, "bool")]); g.add("REDUCE", [g.buffer([3], "bool")], {"op": "MAX", "axes": [0]})
  yield valid("bools", g)


@rule("dtype.match")
def _():
  g = G(); n = g.add("ADD", [g.const(1, "int32"), g.const(1.0)])
  yield invalid("int32-plus-float32", g, n, "B must have A's dtype")
  g = G(); n = g.add("STACK", [g.const(1, "int32"), g.const(1, "int64")])
  yield invalid("stack-mixed", g, n, "STACK sources share a dtype (an op check reusing the rule id)")
  g = G(); g.add("WHERE", [g.const(True, "bool"), g.const(1, "int8"), g.const(2, "int8")])
  yield valid("where", g, "WHERE's A and B match")


@rule("device.match")
def _():
  g = G(); n = g.add("ADD", [g.buffer([3], device="CPU"), g.buffer([3], device="GPU")])
  yield invalid("cpu-plus-gpu", g, n, "sources on different devices")
  g = G(); g.add("ADD", [g.buffer([3], device="GPU"), g.const(1.0)])
  yield valid("const-anywhere", g, "a CONST has no device and goes with any")


@rule("axis.match")
def _():
  d = ["GPU:0", "GPU:1"]
  g = G(); a = g.buffer([4, 4], device=d); p = g.add("PERMUTE", [a], [1, 0]); n = g.add("ADD", [a, p])
  yield invalid("axis-0-plus-axis-1", g, n, "one source sharded on axis 0, the other on axis 1")
  g = G(); a = g.buffer([4, 4], device=d); b = g.buffer([4, 4], device=d); g.add("ADD", [a, b])
  yield valid("same-axis", g)


@rule("level.op")
def _():
  g = G(level="tensor"); n = g.add("RANGE", [g.const(4, "index")], {"id": 0})
  yield invalid("range-in-tensor-graph", g, n, "RANGE exists only inside kernels")
  g = G(level="kernel"); p = g.param([6]); n = g.add("RESHAPE", [p, g.shape(2, 3)])
  yield invalid("reshape-in-kernel", g, n, "movement ops are tensor-level")
  g = G(); n = g.add("INS", arg={"text": "s_nop 0"})
  yield invalid("ins-outside-linear", g, n, "INS appears only in a linear program (the graph is kernel-level)")
  g = G(); kernel_store(g)
  yield valid("range-in-kernel", g)


@rule("declared.dtype")
def _():
  g = G(); n = g.add("CONST", arg={"value": 1, "dtype": "int32"}, dtype="float32")
  yield invalid("int32-declared-float32", g, n)
  g = G(); n = g.add("CONST", arg={"value": 1, "dtype": "int32"}, dtype="float99")
  yield invalid("not-a-dtype", g, n)
  g = G(); a = g.add("CONST", arg={"value": 1, "dtype": "int32"}, dtype="int"); g.add("CMPLT", [a, a], dtype="bool")
  yield valid("alias", g, "'int' is an alias of int32")


@rule("declared.shape")
def _():
  g = G(); s = g.shape(2, 3); n = g.add("BUFFER", [s], {"slot": 0, "dtype": "float32", "device": "CPU"}, shape=[3, 2])
  yield invalid("2x3-declared-3x2", g, n)
  g = G(); s = g.shape(2, 3); b = g.add("BUFFER", [s], {"slot": 0, "dtype": "float32", "device": "CPU"}, shape=[2, 3])
  g.add("REDUCE", [b], {"op": "ADD", "axes": [1]}, shape=[2, 1])
  yield valid("declared", g)


# -- op checks
@rule("PARAM.bounds")
def _():
  g = G(); n = g.add("PARAM", [g.shape(), g.const(1, "index")], {"slot": 0, "dtype": "index"})
  yield invalid("min-without-max", g, n)
  g = G(); n = g.add("PARAM", [g.shape(), g.const(9, "index"), g.const(2, "index")], {"slot": 0, "dtype": "index"})
  yield invalid("min-above-max", g, n)
  g = G(); n = g.add("PARAM", [g.shape(3), g.const(1, "index"), g.const(2, "index")], {"slot": 0, "dtype": "index"})
  yield invalid("bounds-on-vector", g, n, "only a ()-shaped integer PARAM is a symbolic size")
  g = G(); n = g.add("PARAM", [g.shape(), g.const(1, "index"), g.const(16, "index")], {"slot": 0, "dtype": "index"})
  _r = g.add("RANGE", [n], {"id": 0})
  yield valid("symbolic-size", g, "a symbolic size in [1, 16] bounding a RANGE")


@rule("BUFFER.shard")
def _():
  g = G(); b = g.buffer([3], device=["GPU:0", "GPU:1"])
  yield invalid("3-on-2-devices", g, b)
  g = G(); g.buffer([4, 3], device=["GPU:0", "GPU:1"])
  yield valid("4-on-2-devices", g)


@rule("BUFFER.addrspace")
def _():
  g = G(); b = g.buffer([4], addrspace="LOCAL")
  yield invalid("local-in-tensor-graph", g, b)
  g = G(); b = g.buffer([4], addrspace="LOCAL"); r = g.add("RANGE", [g.const(4, "index")], {"id": 0})
  st = g.add("STORE", [g.add("INDEX", [b, r]), g.const(0.0)]); g.add("SINK", [g.add("BARRIER", [g.add("END", [st, r])])])
  yield valid("local-in-kernel", g)


@rule("CONST.value")
def _():
  g = G(); n = g.const(300, "uint8")
  yield invalid("300-uint8", g, n)
  g = G(); n = g.const(1.5, "int32")
  yield invalid("float-in-int32", g, n)
  g = G(); n = g.add("VCONST", arg={"values": [1, 2, 3.5], "dtype": "index"})
  yield invalid("vconst-float-index", g, n)
  g = G(); g.const(255, "uint8"); g.const(-128, "int8"); g.const(True, "bool"); g.const("nan", "bfloat16")
  yield valid("edges", g)


@rule("BUFFER_VIEW.base")
def _():
  g = G(); v = g.add("ADD", [g.buffer([8]), g.const(1.0)]); n = g.add("BUFFER_VIEW", [v], {"size": 4, "dtype": "float32", "offset": 0})
  yield invalid("view-of-computed", g, n)
  g = G(); v = g.add("BUFFER_VIEW", [g.buffer([8])], {"size": 4, "dtype": "float32", "offset": 0}); g.add("BUFFER_VIEW", [v], {"size": 2, "dtype": "int32", "offset": 8})
  yield valid("view-of-view", g)


@rule("BUFFER_VIEW.bounds")
def _():
  g = G(); n = g.add("BUFFER_VIEW", [g.buffer([8])], {"size": 4, "dtype": "float32", "offset": 20})
  yield invalid("past-the-end", g, n, "bytes 20..36 of a 32-byte buffer")
  g = G(); n = g.add("BUFFER_VIEW", [g.buffer([8])], {"size": 2, "dtype": "float32", "offset": 2})
  yield invalid("misaligned", g, n, "offset 2 is not a multiple of 4")
  g = G(); g.add("BUFFER_VIEW", [g.buffer([8])], {"size": 8, "dtype": "float16", "offset": 16})
  yield valid("last-half", g, "the last 16 bytes viewed as float16")


@rule("PERMUTE.perm")
def _():
  g = G(); n = g.add("PERMUTE", [g.buffer([2, 3])], [0, 0])
  yield invalid("repeated-axis", g, n)
  g = G(); n = g.add("PERMUTE", [g.buffer([2, 3])], [0])
  yield invalid("too-short", g, n)
  g = G(); g.add("PERMUTE", [g.buffer([2, 3, 4])], [2, 0, 1])
  yield valid("rotate", g)


@rule("FLIP.len")
def _():
  g = G(); n = g.add("FLIP", [g.buffer([2, 3])], [True])
  yield invalid("one-flag-for-two-axes", g, n)
  g = G(); g.add("FLIP", [g.buffer([2, 3])], [False, True])
  yield valid("two-flags", g)


@rule("RESHAPE.numel")
def _():
  g = G(); n = g.add("RESHAPE", [g.buffer([6]), g.shape(2, 4)])
  yield invalid("6-to-2x4", g, n)
  g = G(); g.add("RESHAPE", [g.buffer([6]), g.shape(2, 3)]); g.add("RESHAPE", [g.buffer([0, 5]), g.shape(0)])
  yield valid("6-to-2x3-and-empty", g)


@rule("RESHAPE.shard")
def _():
  d = ["GPU:0", "GPU:1", "GPU:2", "GPU:3"]
  g = G(); n = g.add("RESHAPE", [g.buffer([4, 6], device=d), g.shape(2, 12)])
  yield invalid("split-shard-axis", g, n, "(4, 6) sharded 4 ways on axis 0 cannot become (2, 12)")
  g = G(); g.add("RESHAPE", [g.buffer([4, 6], device=d), g.shape(4, 2, 3)]); g.add("RESHAPE", [g.buffer([4, 6], device=d), g.shape(1, 24)])
  yield valid("keep-boundary", g, "(4, 2, 3) keeps axis 0; (1, 24) moves it to axis 1")


@rule("EXPAND.dims")
def _():
  g = G(); n = g.add("EXPAND", [g.buffer([2, 3]), g.shape(4, 3)])
  yield invalid("2-to-4", g, n)
  g = G(); n = g.add("EXPAND", [g.buffer([3]), g.shape(2, 3)])
  yield invalid("rank-change", g, n, "EXPAND keeps the rank (RESHAPE first)")
  g = G(); g.add("EXPAND", [g.buffer([1, 3]), g.shape(4, 3)])
  yield valid("1-to-4", g)


@rule("PAD.bounds")
def _():
  g = G(); n = g.add("PAD", [g.buffer([2]), g.shape(3), g.shape(4)])
  yield invalid("does-not-fit", g, n, "(2,) at offset 3 does not fit in (4,)")
  g = G(); n = g.add("PAD", [g.buffer([2, 2]), g.shape(1), g.shape(4, 4)])
  yield invalid("one-offset-for-two-axes", g, n)
  g = G(); g.add("PAD", [g.buffer([2]), g.shape(2), g.shape(4)])
  yield valid("flush-right", g)


@rule("SHRINK.bounds")
def _():
  g = G(); n = g.add("SHRINK", [g.buffer([4]), g.shape(3), g.shape(2)])
  yield invalid("window-past-end", g, n)
  g = G(); g.add("SHRINK", [g.buffer([4]), g.shape(2), g.shape(2)]); g.add("SHRINK", [g.buffer([4]), g.shape(4), g.shape(0)])
  yield valid("last-two-and-empty", g)


@rule("INDEX.count")
def _():
  g = G(); n = g.add("INDEX", [g.buffer([4]), g.const(1, "index"), g.const(2, "index")])
  yield invalid("two-indices-one-axis", g, n)
  g = G(); g.add("INDEX", [g.buffer([4, 5]), g.const(1, "index"), g.const(2, "index")])
  yield valid("two-indices-two-axes", g)


@rule("INDEX.index_shape")
def _():
  g = G(); n = g.add("INDEX", [g.buffer([4]), g.buffer([2, 2], "int32")])
  yield invalid("2d-index", g, n)
  g = G(); g.add("INDEX", [g.buffer([4, 5]), g.buffer([3], "int32")])
  yield valid("gather", g, "a (3,)-shaped index picks 3 rows: (3, 5)")


@rule("STACK.shapes")
def _():
  g = G(); n = g.add("STACK", [g.const(1.0), g.buffer([3])])
  yield invalid("scalar-and-vector", g, n)
  g = G(); g.add("STACK", [g.buffer([3]), g.buffer([3])])
  yield valid("two-vectors", g)


@rule("BITCAST.size")
def _():
  g = G(); n = g.add("BITCAST", [g.const(1.0)], "float16")
  yield invalid("float32-to-float16", g, n, "a ()-shaped source has no last axis to rescale")
  g = G(); n = g.add("BITCAST", [g.buffer([3], "uint8")], "uint16")
  yield invalid("3-bytes-to-uint16", g, n, "3 bytes are not a whole number of uint16s")
  g = G(); g.add("BITCAST", [g.const(1.0)], "int32"); g.add("BITCAST", [g.const(1, "uint16")], "bfloat16")
  yield valid("same-size", g)
  g = G(); g.add("BITCAST", [g.buffer([2, 2])], "float16"); g.add("BITCAST", [g.buffer([2, 4], "uint8")], "float32")
  yield valid("rescaled-last-axis", g, "(2, 2) float32 -> (2, 4) float16; (2, 4) uint8 -> (2, 1) float32 (decision bitcast-size)")


@rule("AFTER.src")
def _():
  g = G(); n = g.add("AFTER", [g.add("ADD", [g.buffer([3]), g.buffer([3])]), g.add("STORE", [g.buffer([3]), g.buffer([3])])])
  yield invalid("after-of-computed", g, n, "AFTER orders a buffer (or a view of one), not a computed value")
  g = G(); b = g.buffer([3]); st = g.add("STORE", [b, g.buffer([3])]); g.add("AFTER", [b, st]); g.add("AFTER", [g.add("RESHAPE", [b, g.shape(3, 1)]), st])
  yield valid("after-of-buffer-and-view", g, "a BUFFER, and a RESHAPE of it")
  g = G(); b = g.buffer([3]); st = g.add("STORE", [b, g.buffer([3])]); v = g.add("AFTER", [g.add("RESHAPE", [b, g.shape(3, 1)]), st])
  g.add("AFTER", [v, g.add("STORE", [g.add("AFTER", [b, st]), g.buffer([3])])])
  yield valid("after-of-assigned-view", g, "a view of a buffer assigned twice: AFTER(AFTER(RESHAPE(BUFFER), STORE), STORE), as tinygrad's assign makes it")


@rule("GROUP.src")
def _():
  g = G(); b = g.buffer([3]); n = g.add("GROUP", [g.add("SINK", [g.add("STORE", [b, g.buffer([3])])])])
  yield invalid("group-of-sink", g, n, "a GROUP merges STOREs, ENDs, ATOMICADDs and GROUPs")
  g = G(); b = g.buffer([3]); st = g.add("STORE", [b, g.buffer([3])]); g.add("GROUP", [g.add("GROUP", [st])])
  yield valid("group-of-group", g)


@rule("REDUCE.axes")
def _():
  g = G(); n = g.add("REDUCE", [g.buffer([2, 3])], {"op": "ADD", "axes": [2]})
  yield invalid("axis-out-of-range", g, n)
  g = G(); n = g.add("REDUCE", [g.buffer([2, 3])], {"op": "MAX", "axes": [0, 0]})
  yield invalid("repeated-axis", g, n)
  g = G(); n = g.add("REPLICATED", [g.buffer([4], device=["GPU:0", "GPU:1"])], [1])
  yield invalid("replicated-axis-out-of-range", g, n, "REPLICATED reuses the rule id")
  g = G(); g.add("REDUCE", [g.buffer([2, 3])], {"op": "MUL", "axes": [0, 1]}); g.add("REPLICATED", [g.buffer([4, 2], device=["GPU:0", "GPU:1"])], [0])
  yield valid("all-axes", g)


@rule("REDUCE.form")
def _():
  g = G(); p = g.param([4]); r = g.add("RANGE", [g.const(4, "index")], {"id": 0})
  n = g.add("REDUCE", [p, r], {"op": "ADD", "axes": [0]})
  yield invalid("axes-and-ranges", g, n)
  g = G(); p = g.param([4]); r = g.add("RANGE", [g.const(4, "index")], {"id": 0, "type": "REDUCE"})
  g.add("REDUCE", [g.add("INDEX", [p, r]), r], {"op": "ADD"})
  yield valid("over-a-range", g, "a kernel-level sum over a RANGE")


@rule("FUNCTION.body")
def _():
  g = G(); p = g.param([3]); body = g.add("NEG", [p]); n = g.add("FUNCTION", [body, g.buffer([3])])
  yield invalid("body-not-tuple", g, n)
  g = G(); p = g.param([3]); f = g.add("FUNCTION", [g.add("TUPLE", [g.add("NEG", [p])]), g.buffer([3])]); g.add("GETTUPLE", [f], 0)
  yield valid("tuple-body", g)


@rule("FUNCTION.param")
def _():
  g = G(); p = g.param([3], slot=1); f = g.add("FUNCTION", [g.add("TUPLE", [p]), g.buffer([3])])
  yield invalid("slot-without-argument", g, f)
  g = G(); p = g.param([3]); f = g.add("FUNCTION", [g.add("TUPLE", [p]), g.buffer([3], "int32")])
  yield invalid("dtype-differs", g, f)
  g = G(); p = g.param([3]); f = g.add("CALL", [g.add("TUPLE", [p]), g.buffer([4])])
  yield invalid("call-shape-differs", g, f, "CALL reuses the rule id")
  g = G(); a = g.param([3]); b = g.param([3], slot=1)
  f = g.add("FUNCTION", [g.add("TUPLE", [g.add("ADD", [a, b]), a]), g.buffer([3]), g.buffer([3])]); g.add("GETTUPLE", [f], 1)
  yield valid("two-params", g)


@rule("CALL.body")
def _():
  g = G(); p = g.param([3]); n = g.add("CALL", [g.add("NEG", [p]), g.buffer([3])])
  yield invalid("body-not-callable", g, n)
  g = G(); k = kernel_store(g); g.add("CALL", [k, g.buffer([4])])
  yield valid("kernel", g, "a tensor graph CALLs a kernel SINK")


@rule("GETTUPLE.tuple")
def _():
  g = G(); n = g.add("GETTUPLE", [g.const(1.0)], 0)
  yield invalid("of-a-const", g, n)
  g = G(); g.add("GETTUPLE", [g.add("TUPLE", [g.const(1.0), g.const(2, "int32")])], 1)
  yield valid("of-a-tuple", g)


@rule("GETTUPLE.range")
def _():
  g = G(); n = g.add("GETTUPLE", [g.add("TUPLE", [g.const(1.0)])], 1)
  yield invalid("past-the-end", g, n)
  g = G(); g.add("GETTUPLE", [g.add("TUPLE", [g.const(1.0)])], 0)
  yield valid("last", g)


@rule("LOAD.gate")
def _():
  g = G(); n = g.add("LOAD", [g.buffer([3]), g.buffer([3])])
  yield invalid("alt-without-gate", g, n)
  g = G(); n = g.add("LOAD", [g.buffer([3]), g.buffer([3]), g.buffer([3], "bool")])
  yield invalid("vector-gate", g, n)
  g = G(); b = g.buffer([3]); n = g.add("STORE", [b, g.buffer([3]), g.buffer([3], "bool")])
  yield invalid("store-vector-gate", g, n, "STORE reuses the rule id")
  g = G(); b = g.buffer([3]); g.add("STORE", [b, g.add("LOAD", [g.buffer([3]), g.buffer([3]), g.const(False, "bool")]), g.const(True, "bool")])
  yield valid("gated", g)


@rule("STORE.shape")
def _():
  g = G(); n = g.add("STORE", [g.buffer([3]), g.buffer([4])])
  yield invalid("3-from-4", g, n)
  g = G(); g.add("SINK", [g.add("STORE", [g.buffer([3]), g.buffer([3])])])
  yield valid("same-shape", g)


@rule("STORE.target")
def _():
  g = G(); n = g.add("STORE", [g.add("NEG", [g.buffer([3])]), g.buffer([3])])
  yield invalid("into-computed", g, n)
  g = G(); p = g.param([4], "int32"); n = g.add("ATOMICADD", [g.add("ADD", [g.add("INDEX", [p, g.const(0, "index")]), g.const(1, "int32")]), g.const(1, "int32")])
  g.add("SINK", [n])
  yield invalid("atomicadd-into-computed", g, n, "ATOMICADD reuses the rule id")
  g = G(); b = g.buffer([4]); g.add("STORE", [g.add("INDEX", [g.add("DETACH", [b]), g.const(1, "index")]), g.const(2.0)])
  yield valid("through-index", g, "storage reached through DETACH and INDEX")


@rule("RANGE.bound")
def _():
  g = G(); n = g.add("RANGE", [g.shape(4)], {"id": 0})
  yield invalid("vector-bound", g, n)
  g = G(); g.add("RANGE", [g.const(0, "index")], {"id": 0, "type": "GLOBAL"})
  yield valid("empty-range", g)


@rule("LINEAR.order")
def _():
  g = G(); a = g.const(1, "int32"); b = g.const(2, "int32"); s = g.add("ADD", [a, b]); n = g.add("LINEAR", [s, a, b])
  yield invalid("use-before-def", g, n)
  g = G(); a = g.const(1, "int32"); b = g.const(2, "int32"); s = g.add("ADD", [a, b]); g.add("LINEAR", [a, b, s])
  yield valid("in-order", g)


@rule("ENDIF.if")
def _():
  g = G(); n = g.add("ENDIF", [g.const(True, "bool")])
  yield invalid("of-a-const", g, n)
  g = G(); c = g.const(True, "bool"); i = g.add("IF", [c]); e = g.add("ENDIF", [i]); g.add("LINEAR", [c, i, e])
  yield valid("if-endif", g)


@rule("WMMA.shapes")
def _():
  g = G(level="kernel"); n = g.add("WMMA", [g.param([2, 2]), g.param([2, 2], slot=1), g.param([2, 3], slot=2)], {})
  yield invalid("acc-2x3", g, n)
  g = G(level="kernel"); g.add("WMMA", [g.param([2, 4]), g.param([4, 3], slot=1), g.param([2, 3], slot=2)], {})
  yield valid("2x4-times-4x3", g)


@rule("COPY.shard")
def _():
  g = G(); n = g.add("COPY", [g.buffer([3])], {"device": ["GPU:0", "GPU:1"]})
  yield invalid("3-to-2-devices", g, n)
  g = G(); g.add("COPY", [g.buffer([4])], {"device": ["GPU:0", "GPU:1"]}); g.add("COPY", [g.buffer([3])], {"device": "GPU:0"})
  yield valid("scatter-and-move", g)


@rule("PROGRAM.parts")
def _():
  g = G(); s = g.add("SOURCE", arg={"text": "k"}); n = g.add("PROGRAM", [s])
  yield invalid("no-linear", g, n)
  g = G(); c = g.const(1, "int32"); lin = g.add("LINEAR", [c]); g.add("PROGRAM", [lin, g.add("SOURCE", arg={"text": "k", "language": "c"}), g.add("BINARY", arg={"data": "AAEC"})])
  yield valid("all-parts", g)


# ------------------------------------------------------------------ writing
def expect_file(case: Case, rule_id: str | None, op: str | None) -> dict:
  e: dict = {"valid": case.valid, "exit": case.exit}
  if not case.valid:
    e["rule"] = case.rule or rule_id
    e["node"] = case.node
    e["only"] = True
  d: dict = {}
  if rule_id: d["rule"] = rule_id
  if op: d["op"] = op
  d["input"] = case.name + "." + case.ext if not case.missing else case.name + ".json"
  if case.description: d["description"] = case.description
  if case.level: d["level"] = case.level
  d["expect"] = e
  return d


def dumps_graph(doc) -> str:
  """One node per line, like Graph.dumps, so the files diff well."""
  if isinstance(doc, list): return "[\n  " + ",\n  ".join(json.dumps(n) for n in doc) + "\n]\n"
  head = {k: v for k, v in doc.items() if k != "nodes"}
  return json.dumps(head)[:-1] + (", " if head else "") + '"nodes": [\n  ' + ",\n  ".join(json.dumps(n) for n in doc["nodes"]) + "\n]}\n"


def write_corpus(out: Path) -> int:
  T = tables()
  n = 0
  for rule_id, fn in CASES.items():
    d = out / rule_id
    d.mkdir(parents=True, exist_ok=True)
    for case in fn():
      if not case.missing:
        data = case.raw if case.raw is not None else dumps_graph(case.doc).encode()
        (d / f"{case.name}.{case.ext}").write_bytes(data)
      (d / f"{case.name}.expect.json").write_text(json.dumps(expect_file(case, rule_id, None), indent=1) + "\n")
      n += 1
  for name, op in T.ops.items():
    d = out / "ops" / name
    d.mkdir(parents=True, exist_ok=True)
    case = Case("valid-example", True, op.example, description=f"the example of {name} in spec/ops.yaml")
    (d / "valid-example.json").write_text(dumps_graph(op.example))
    (d / "valid-example.expect.json").write_text(json.dumps(expect_file(case, None, name), indent=1) + "\n")
    n += 1
  return n


def _tree(p: Path) -> dict[str, bytes]:
  return {f.relative_to(p).as_posix(): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file() and f.name != README}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--check", action="store_true", help="exit 1 if conformance/rules/ differs from what this script writes")
  ap.add_argument("--out", type=Path, default=OUT)
  a = ap.parse_args(argv)
  with tempfile.TemporaryDirectory() as tmp:
    n = write_corpus(Path(tmp))
    new = _tree(Path(tmp))
    old = _tree(a.out) if a.out.is_dir() else {}
    if a.check:
      stale = sorted(set(new) ^ set(old) | {k for k in new if k in old and new[k] != old[k]})
      if stale:
        print(f"{a.out} is stale ({len(stale)} files differ, e.g. {stale[:3]}); run tools/gen_rule_cases.py", file=sys.stderr)
        return 1
      print(f"{a.out}: {n} cases, up to date")
      return 0
    for k in set(old) - set(new): (a.out / k).unlink()
    for k, data in new.items():
      p = a.out / k
      p.parent.mkdir(parents=True, exist_ok=True)
      if old.get(k) != data: p.write_bytes(data)
    for d in sorted((p for p in a.out.rglob("*") if p.is_dir()), reverse=True):
      if not any(d.iterdir()): d.rmdir()
  print(f"wrote {n} cases to {a.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
