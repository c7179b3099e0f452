#!/usr/bin/env python3
"""A tiny conformance backend that knows nothing of tinyspec: Python and NumPy only.

It speaks the JSON-lines protocol of conformance/run/protocol.py on stdin/stdout, declares
the few ops and dtypes it implements, and evaluates tensor-level graphs of them. Put it
through the suite with

  tinyspec conformance --backend "cmd:python conformance/examples/numpy_backend.py"

(its manifest, numpy-example.yaml beside it, it names in its hello). A backend in C++
or Rust follows the same protocol: read a request line, load the graph file and the .npy
inputs, write the outputs as .npy files, answer with one line.
"""
import json
import sys
import numpy as np

NAME = "numpy-example"
DTYPES = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64}


def binary(f): return lambda a, b: f(a, b)


# op -> (number of sources, function of the source values and the arg)
OPS = {
  "ADD": lambda s, arg: s[0] + s[1],
  "MUL": lambda s, arg: s[0] * s[1],
  "MAX": lambda s, arg: np.where(s[0] < s[1], s[1], s[0]),   # b if a < b else a: a NaN or equal zeros give the first
  "NEG": lambda s, arg: -s[0] if s[0].dtype != np.bool_ else s[0],
  "SUB": lambda s, arg: s[0] - s[1],
  "CMPLT": lambda s, arg: s[0] < s[1],
  "CMPNE": lambda s, arg: s[0] != s[1],
  "WHERE": lambda s, arg: np.where(s[0] != 0, s[1], s[2]),
  "PERMUTE": lambda s, arg: np.transpose(s[0], arg),
  "RESHAPE": lambda s, arg: s[0].reshape(tuple(int(x) for x in np.atleast_1d(s[1]))) if s[1].size or s[1].ndim else s[0].reshape(()),
}


def const(value, dtype):
  if isinstance(value, str): value = float(value)
  return np.array(value, dtype=DTYPES[dtype])


def evaluate(doc, inputs):
  nodes = doc["nodes"] if isinstance(doc, dict) else doc
  roots = doc.get("roots") if isinstance(doc, dict) else None
  vals = []
  for n in nodes:
    op, src, arg = n["op"], [vals[j] for j in n.get("src", [])], n.get("arg")
    if op == "CONST": v = const(arg["value"], arg["dtype"]) if arg["dtype"] in DTYPES else np.array(int(arg["value"]))
    elif op == "VCONST":
      t = DTYPES.get(arg["dtype"], np.int64)
      v = np.array([float(x) if isinstance(x, str) else x for x in arg["values"]], dtype=t)
    elif op == "BUFFER":
      # the input naming rule of docs/architecture.md written out here (not tinyspec.dispatch.input_name):
      # this file is a stranger's backend, which speaks the protocol and imports nothing of tinyspec
      name = arg.get("name") or f"buf{arg['slot']}"
      shape = tuple(int(x) for x in src[0])
      v = inputs[name].reshape(shape) if name in inputs else np.zeros(shape, DTYPES[arg["dtype"]])
    elif op in OPS:
      with np.errstate(all="ignore"): v = np.asarray(OPS[op](src, arg))
    else:
      raise ValueError(f"op {op} is not implemented")
    vals.append(v)
  roots = roots if roots is not None else [len(nodes) - 1]
  return {f"out{k}": vals[r] for k, r in enumerate(roots)}


def capabilities():
  ops = {op: ["tensor"] for op in list(OPS) + ["CONST", "VCONST", "BUFFER"]}
  # validates: false -- it evaluates what it can and checks nothing, so the corpus's
  # invalid graphs (negative cases) do not apply to it
  return {"ops": ops, "dtypes": sorted(DTYPES) + ["index"], "devices": ["CPU"], "validates": False}


def handle(msg):
  if msg.get("cmd") == "hello":   # its manifest (expected failures, exclusions) is relative to this file's folder
    return {"ok": True, "protocol": 1, "name": NAME, "manifest": "numpy-example.yaml", "capabilities": capabilities()}
  if msg.get("cmd") != "run": return {"ok": False, "error": f"unknown cmd {msg.get('cmd')!r}"}
  try:
    with open(msg["graph"]) as f: doc = json.load(f)
    inputs = {k: np.load(p) for k, p in msg.get("inputs", {}).items()}
    outs = evaluate(doc, inputs)
  except Exception as e:   # a refusal: the runner judges it
    return {"id": msg.get("id"), "ok": False, "error": f"{type(e).__name__}: {e}"}
  paths = {}
  for k, v in outs.items():
    paths[k] = f"{msg['out_dir']}/{k}.npy"
    np.save(paths[k], v)
  return {"id": msg.get("id"), "ok": True, "outputs": paths}


def main():
  for line in sys.stdin:
    if not line.strip(): continue
    msg = json.loads(line)
    if msg.get("cmd") == "quit": break
    sys.stdout.write(json.dumps(handle(msg)) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
  main()
