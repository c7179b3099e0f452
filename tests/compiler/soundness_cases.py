"""Minimal graphs of the five classes of unsound kernels issue 12 found, each a function
returning (graph, inputs): run on a compiled backend it must give the reference
evaluator's result (or its refusal, with the same rule id), touching no memory it does
not own. Shared by tests/compiler/test_compiler_soundness.py and its AddressSanitizer child.

  1. literal   an int8 (x // 100) // 100 that the simplifier folded into x // 10000 (no
               int8 literal), +1, as a gather index and as a scatter index
  2. gate_wrap an int8 x + 1 under the gate x >= 5 (127 + 1 wraps to -128), read and stored
  3. sizes     a symbolic size (min 1, max 4) given 1e8 or -1, directly and through a CALL
               whose outer PARAM allows [1, 1e9]
  4. parallel  a loop-carried store under THREAD, GLOBAL, LOCAL and LOOP axes, and work
               items (SPECIAL) that all write one element
  5. call_const a CALL passing a CONST as the kernel's symbolic size (by value) and as a
               ()-shaped buffer PARAM (through memory)
"""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.build import Builder


def literal(form: str = "gather"):
  b = Builder()
  x = b.buffer((256,), "int8", 0)
  y = b.IDIV(b.IDIV(x, b.const(100, "int8")), b.const(100, "int8"))
  i = b.ADD(y, b.const(1, "int8"))
  inputs = {"buf0": np.arange(-128, 128).astype(np.int8)}
  if form == "gather":
    src = b.buffer((2,), "float32", 1)
    inputs["buf1"] = np.array([1.5, 2.5], np.float32)
    return b.graph([b.INDEX(src, i)]), inputs
  dst = b.buffer((2,), "float32", 1)
  v = b.CAST(x, arg="float32")
  return b.graph([b.SINK(b.STORE(b.INDEX(dst, i), v))]), inputs


def gate_wrap(form: str = "store"):
  b = Builder()
  x = b.param((256,), "int8", 0); out = b.param((200 if form == "store" else 256,), "float32", 1)
  r = b.range(256, 0)
  xv = b.INDEX(x, r)
  gate = b.CMPNE(b.CMPLT(xv, b.const(5, "int8")), b.const(True, "bool"))
  j = b.ADD(xv, b.const(1, "int8"))
  if form == "store":
    b.SINK(b.END(b.STORE(b.INDEX(out, j), b.const(7.0, "float32"), gate), r))
  else:
    src = b.param((130,), "float32", 2)
    v = b.LOAD(b.INDEX(src, j), b.const(-1.0, "float32"), gate)   # gate true, index out of range: 0, not -1
    b.SINK(b.END(b.STORE(b.INDEX(out, r), v), r))
  inputs = {"param0": np.arange(-128, 128).astype(np.int8)}
  if form != "store": inputs["param2"] = np.arange(130, dtype=np.float32)
  return b.graph(), inputs


def sizes(value: int, through_call: bool = False):
  """out[i] = 2 x[i] for i < n, n a symbolic size in [1, 4] (4 elements)."""
  b = Builder()
  kx = b.param((4,), "int32", 0); ko = b.param((4,), "int32", 1)
  kn = b.param((), "index", 2, bounds=(1, 4))
  i = b.range(bound=kn, id=0)
  k = b.SINK(b.END(b.STORE(b.INDEX(ko, i), b.MUL(b.INDEX(kx, i), b.const(2, "int32"))), i))
  xs = np.arange(1, 5, dtype=np.int32)
  if not through_call: return b.graph(), {"param0": xs, "param2": value}
  X = b.buffer((4,), "int32", 0); O = b.buffer((4,), "int32", 1)
  n = b.param((), "index", 0, name="n", bounds=(1, 10 ** 9))
  return b.graph([b.SINK(b.CALL(k, X, O, n))]), {"buf0": xs, "n": value}


def call_const(value: int):
  b = Builder()
  kx = b.param((4,), "int32", 0); ko = b.param((4,), "int32", 1)
  kn = b.param((), "index", 2, bounds=(1, 4))
  i = b.range(bound=kn, id=0)
  k = b.SINK(b.END(b.STORE(b.INDEX(ko, i), b.MUL(b.INDEX(kx, i), b.const(2, "int32"))), i))
  X = b.buffer((4,), "int32", 0); O = b.buffer((4,), "int32", 1)
  return b.graph([b.SINK(b.CALL(k, X, O, b.const(value, "index")))]), {"buf0": np.arange(1, 5, dtype=np.int32)}


def call_const_buffer():
  """A CONST bound to a kernel's ()-shaped buffer PARAM (read through memory, not by value)."""
  b = Builder()
  kv = b.param((), "int32", 0); ko = b.param((4,), "int32", 1)
  i = b.range(4, 0)
  k = b.SINK(b.END(b.STORE(b.INDEX(ko, i), b.ADD(kv, b.CAST(i, arg="int32"))), i))
  O = b.buffer((4,), "int32", 1)
  return b.graph([b.SINK(b.CALL(k, b.const(5, "int32"), O))]), {}


def parallel(axis: str, n: int = 4096):
  """out[0] = out[0] + 1 + (r & 0) over a loop of n iterations typed `axis`: every
  iteration reads the contents before the kernel (decision kernel-loops), so out[0] is 1;
  and out2[r % 3] = r, last write wins."""
  b = Builder()
  out = b.param((1,), "int32", 0); out2 = b.param((3,), "int32", 1)
  r = b.range(n, 0, type=axis)
  zero = b.AND(r, b.const(0, "index"))
  s1 = b.STORE(b.INDEX(out, zero), b.ADD(b.ADD(b.INDEX(out, zero), b.const(1, "int32")), b.AND(b.CAST(r, arg="int32"), b.const(0, "int32"))))
  s2 = b.STORE(b.INDEX(out2, b.MOD(r, b.const(3, "index"))), b.CAST(r, arg="int32"))
  b.SINK(b.END(b.GROUP(s1, s2), r))
  return b.graph(), {}


def specials(n: int = 64):
  """Every work item gidx0 writes out[0] = x[g]: the last (by decision kernel-loops) wins."""
  b = Builder()
  x = b.param((n,), "int32", 0); out = b.param((1,), "int32", 1)
  g = b.add("SPECIAL", b.const(n, "index"), arg={"name": "gidx0"})
  b.SINK(b.STORE(b.INDEX(out, b.const(0, "index")), b.INDEX(x, g)))
  return b.graph(), {"param0": np.arange(n, dtype=np.int32) * 3}


CASES = {
  "literal-gather": lambda: literal("gather"), "literal-scatter": lambda: literal("scatter"),
  "gate-wrap-store": lambda: gate_wrap("store"), "gate-wrap-load": lambda: gate_wrap("load"),
  "sizes-in-bounds": lambda: sizes(3), "sizes-huge": lambda: sizes(10 ** 8), "sizes-negative": lambda: sizes(-1),
  "sizes-call-huge": lambda: sizes(10 ** 8, True), "sizes-call-in-bounds": lambda: sizes(4, True),
  "call-const": lambda: call_const(3), "call-const-out-of-bounds": lambda: call_const(7),
  "call-const-buffer": call_const_buffer,
  "parallel-thread": lambda: parallel("THREAD"), "parallel-global": lambda: parallel("GLOBAL"),
  "parallel-local": lambda: parallel("LOCAL"), "parallel-loop": lambda: parallel("LOOP"),
  "parallel-upcast": lambda: parallel("UPCAST", 16), "specials": specials,
}


def outcome(run):
  """('ok', outputs) or ('refused', rule id) of run() (a reference or compiled run)."""
  try: return "ok", run()
  except Exception as e:
    rule = getattr(e, "rule", None)
    if isinstance(rule, str): return "refused", rule
    raise


def agree(name: str, target: str) -> str | None:
  """None when the compiled run of case `name` agrees with the reference (the same
  outputs bit for bit, or a refusal with the same rule id), else what differs."""
  from tinyspec.refimpl import evaluate
  from tinyspec.compiler import compile_graph
  from tinyspec.compiler.check import compare_outputs
  g, inputs = CASES[name]()
  want = outcome(lambda: evaluate(g, inputs))
  got = outcome(lambda: compile_graph(g, target, keep_stages=False).run(inputs))
  if want[0] != got[0]: return f"reference {want}, {target} {got}"
  if want[0] == "refused": return None if want[1] == got[1] else f"refused with {got[1]}, the reference with {want[1]}"
  bad = compare_outputs(got[1], want[1])
  return f"{bad}" if bad else None
