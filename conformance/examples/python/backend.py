#!/usr/bin/env python3
"""A tinyspec conformance backend in Python and NumPy, knowing nothing of tinyspec: a
starting point to grow your own.

It speaks the backend protocol (`tinyspec docs --out docs` writes docs/protocol.md) on
stdin/stdout with inline arrays: a request is one JSON line, its arrays are JSON integers
(float elements as their IEEE bit patterns), and so is the answer. It evaluates
tensor-level graphs of the ops in OPS, in every dtype (bfloat16 held as float32 values).

  tinyspec conformance --backend "cmd:python backend.py" -k ADD
  tinyspec run --case ADD/float32 --backend "cmd:python backend.py"

To add an op: declare it and compute it in OPS. The manifest beside this file (named in
the hello, relative to this file's folder) lists the cases it is expected to fail.
"""
import json
import sys
import numpy as np

NAME = "starter-python"
# dtype -> (the NumPy type it computes in, the unsigned or signed integers its inline data are)
DTYPES = {"bool": (np.bool_, np.uint8), "int8": (np.int8, np.int8), "int16": (np.int16, np.int16), "int32": (np.int32, np.int32),
          "int64": (np.int64, np.int64), "index": (np.int64, np.int64), "uint8": (np.uint8, np.uint8), "uint16": (np.uint16, np.uint16),
          "uint32": (np.uint32, np.uint32), "uint64": (np.uint64, np.uint64), "float16": (np.float16, np.uint16),
          "bfloat16": (np.float32, np.uint16), "float32": (np.float32, np.uint32), "float64": (np.float64, np.uint64)}


def mod(a, b):   # the sign of the divisor; a mod 0 = a
  return np.where(b == 0, a, np.mod(a, np.where(b == 0, 1, b)))


# op -> function of the source values and the arg; the result's dtype is the first source's
# (SAME), bool (BOOL) or the second source's (WHERE)
OPS = {
  "ADD": lambda s, arg: s[0] + s[1],
  "SUB": lambda s, arg: s[0] - s[1],
  "MUL": lambda s, arg: s[0] * s[1],
  "MOD": lambda s, arg: mod(s[0], s[1]),
  "MAX": lambda s, arg: np.where(s[0] < s[1], s[1], s[0]),   # b if a < b else a: a NaN or equal zeros give the first
  "NEG": lambda s, arg: -s[0] if s[0].dtype != np.bool_ else s[0],
  "CMPLT": lambda s, arg: s[0] < s[1],
  "CMPNE": lambda s, arg: s[0] != s[1],
  "WHERE": lambda s, arg: np.where(s[0], s[1], s[2]),
  "PERMUTE": lambda s, arg: np.transpose(s[0], arg),
  "RESHAPE": lambda s, arg: s[0].reshape(tuple(int(x) for x in np.atleast_1d(s[1]))),
}
BOOL = {"CMPLT", "CMPNE"}


# ------------------------------------------------------------------ inline arrays
def round_bfloat16(x):
  """float32 values rounded to the nearest bfloat16 (ties to even), still as float32."""
  bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
  rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
  return np.where(np.isnan(x), np.float32("nan"), rounded)


def decode(a):
  """An inline array {"dtype", "shape", "data"} as NumPy values (bfloat16 as float32)."""
  compute, data = DTYPES[a["dtype"]]
  bits = np.array(a["data"], dtype=data).reshape(a["shape"])
  if a["dtype"] == "bfloat16": return (bits.astype(np.uint32) << 16).view(np.float32)
  return bits.astype(compute) if a["dtype"] == "bool" else bits.view(compute)


def encode(x, dtype):
  compute, data = DTYPES[dtype]
  x = np.array(x, dtype=compute, order="C")   # (not ascontiguousarray: it makes a ()-shaped array (1,))
  if dtype == "bfloat16": bits = (round_bfloat16(x).view(np.uint32) >> 16).astype(np.uint16)
  else: bits = x.astype(data) if dtype == "bool" else x.view(data)
  return {"dtype": dtype, "shape": list(x.shape), "data": bits.reshape(-1).tolist()}


# ------------------------------------------------------------------ graphs
def const(value, dtype):
  if isinstance(value, str): value = float(value)   # "nan", "inf", "-inf"
  return np.array(value, dtype=DTYPES[dtype][0])


def evaluate(doc, inputs):
  """Output name -> (value, dtype): out{k} for the k-th root (default: the last node)."""
  nodes = doc["nodes"] if isinstance(doc, dict) else doc
  roots = doc.get("roots") if isinstance(doc, dict) else None
  vals, dts = [], []
  for n in nodes:
    op, src, arg = n["op"], [vals[j] for j in n.get("src", [])], n.get("arg")
    sdts = [dts[j] for j in n.get("src", [])]
    if op == "CONST": v, dt = const(arg["value"], arg["dtype"]), arg["dtype"]
    elif op == "VCONST": v, dt = np.array([const(x, arg["dtype"]) for x in arg["values"]], DTYPES[arg["dtype"]][0]), arg["dtype"]
    elif op == "BUFFER":   # its input: the arg's name, else buf{slot}
      name = arg.get("name") or f"buf{arg['slot']}"
      if inputs[name]["dtype"] != arg["dtype"]: raise ValueError(f"input {name} is {inputs[name]['dtype']}, its BUFFER {arg['dtype']}")
      v, dt = decode(inputs[name]).reshape(tuple(int(x) for x in np.atleast_1d(src[0]))), arg["dtype"]
    elif op in OPS:
      with np.errstate(all="ignore"): v = np.asarray(OPS[op](src, arg))
      dt = "bool" if op in BOOL else sdts[1] if op == "WHERE" else sdts[0]
      if dt == "bfloat16": v = round_bfloat16(v)   # computed in float32, rounded once (exact for + - *)
    else:
      raise ValueError(f"op {op} is not implemented")
    vals.append(v); dts.append(dt)
  roots = roots if roots is not None else [len(nodes) - 1]
  return {f"out{k}": (vals[r], dts[r]) for k, r in enumerate(roots)}


# ------------------------------------------------------------------ the protocol
def capabilities():
  ops = {op: ["tensor"] for op in list(OPS) + ["CONST", "VCONST", "BUFFER"]}
  # validates: false -- it evaluates what it can and checks nothing, so the corpus's
  # invalid graphs (negative cases) do not apply to it
  return {"ops": ops, "dtypes": sorted(DTYPES), "devices": ["*"], "validates": False}


def handle(msg):
  if msg.get("cmd") == "hello":
    if "inline" not in msg.get("arrays", []): return {"ok": False, "error": "this backend reads arrays inline only"}
    return {"ok": True, "protocol": 1, "name": NAME, "arrays": "inline", "manifest": "manifest.yaml", "capabilities": capabilities()}
  if msg.get("cmd") != "run": return {"ok": False, "error": f"unknown cmd {msg.get('cmd')!r}"}
  try:
    with open(msg["graph"]) as f: doc = json.load(f)
    outs = evaluate(doc, msg["inputs"])
  except Exception as e:   # a refusal: the runner judges it
    return {"id": msg["id"], "ok": False, "error": f"{type(e).__name__}: {e}"}
  return {"id": msg["id"], "ok": True, "outputs": {k: encode(v, dt) for k, (v, dt) in outs.items()}}


def main():
  for line in sys.stdin:
    if not line.strip(): continue
    msg = json.loads(line)
    if msg.get("cmd") == "quit": break
    sys.stdout.write(json.dumps(handle(msg)) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
  main()
