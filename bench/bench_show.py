"""`tinyspec show` speed: draw 100,000-node graphs, against a 5-second budget.

Four graphs of --nodes nodes (default 100,000):
  chain    each node uses the one before it: collapses into one chain box
  wide     a random DAG of mixed tensor ops (bench_validate.wide_dag): cut at --limit boxes
  program  a LINEAR listing every instruction (a random DAG of ADD/MUL/MAX on scalars)
  kernels  a tensor graph calling many small kernels: a cluster per kernel body
Each is written to a file and drawn by the command line, in this process, as SVG and as
HTML (`tinyspec show FILE -o OUT`: load, validate, collapse, select, lay out, write).
Prints the seconds (CPU of this process, best of --repeat, and wall) of each, and the
ratio to the budget (below 1.0 is within budget), and the boxes drawn.

  .venv/bin/python bench/bench_show.py [--nodes N] [--repeat R] [--profile]
"""
from __future__ import annotations
import argparse
import cProfile
import json
import os
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_validate import chain, wide_dag   # noqa: E402
from tinyspec.cli import main as cli         # noqa: E402

BUDGET_S = 5.0     # per 100,000 nodes, file to picture
PER = 100_000


def program(n: int, seed: int = 0) -> dict:
  """A program-level graph: scalar instructions drawing sources among earlier ones, all
  listed by one LINEAR, under a PROGRAM."""
  rnd = random.Random(seed)
  nodes = [{"op": "CONST", "arg": {"value": 1.5, "dtype": "float32"}}, {"op": "CONST", "arg": {"value": 0.25, "dtype": "float32"}}]
  while len(nodes) < n - 2:
    k = len(nodes)
    a = k - 1 if rnd.random() < 0.6 else rnd.randrange(k)
    nodes.append({"op": rnd.choice(("ADD", "MUL", "MAX")), "src": [a, rnd.randrange(k)]})
  nodes.append({"op": "LINEAR", "src": list(range(len(nodes)))})
  nodes.append({"op": "PROGRAM", "src": [len(nodes) - 1]})
  return {"format": "tinyspec-graph", "version": 1, "level": "program", "nodes": nodes}


def kernels(n: int, seed: int = 0) -> dict:
  """A tensor graph of CALLs, each of its own kernel SINK (out[i] = a[i] * c + b[i] over
  a RANGE), chained through their output buffers."""
  rnd = random.Random(seed)
  nodes: list[dict] = []
  def add(d):
    nodes.append(d); return len(nodes) - 1
  size = add({"op": "VCONST", "arg": {"values": [16], "dtype": "index"}})
  bound = add({"op": "CONST", "arg": {"value": 16, "dtype": "index"}})
  prev = add({"op": "BUFFER", "src": [size], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}})
  slot = 1
  while len(nodes) < n - 30:
    p = [add({"op": "PARAM", "src": [size], "arg": {"slot": k, "dtype": "float32"}}) for k in range(3)]
    r = add({"op": "RANGE", "src": [bound], "arg": {"id": 0, "type": "LOOP"}})
    a = add({"op": "LOAD", "src": [add({"op": "INDEX", "src": [p[1], r]})]})
    b = add({"op": "LOAD", "src": [add({"op": "INDEX", "src": [p[2], r]})]})
    c = add({"op": "CONST", "arg": {"value": rnd.uniform(-2, 2), "dtype": "float32"}})
    v = add({"op": "ADD", "src": [add({"op": "MUL", "src": [a, c]}), b]})
    st = add({"op": "STORE", "src": [add({"op": "INDEX", "src": [p[0], r]}), v]})
    sink = add({"op": "SINK", "src": [add({"op": "END", "src": [st, r]})], "arg": {"name": f"k{slot}"}})
    out = add({"op": "BUFFER", "src": [size], "arg": {"slot": slot, "dtype": "float32", "device": "CPU"}})
    call = add({"op": "CALL", "src": [sink, out, prev, prev]})
    prev = add({"op": "AFTER", "src": [out, call]})
    slot += 1
  return {"format": "tinyspec-graph", "version": 1, "level": "tensor", "nodes": nodes}


def measure(name: str, doc, repeat: int, profile: bool) -> float:
  doc = doc if isinstance(doc, dict) else {"format": "tinyspec-graph", "version": 1, "nodes": doc}
  n = len(doc["nodes"])
  worst = 0.0
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, f"{name}.json")
    with open(path, "w") as f: json.dump(doc, f)
    for fmt in ("svg", "html"):
      out = os.path.join(d, f"{name}.{fmt}")
      best_cpu = best_wall = float("inf")
      for _ in range(repeat):
        w0, t0 = time.perf_counter(), time.process_time()
        rc = cli(["show", path, "-o", out])
        best_cpu, best_wall = min(best_cpu, time.process_time() - t0), min(best_wall, time.perf_counter() - w0)
        assert rc == 0, f"{name}: exit {rc}"
      text = Path(out).read_text(encoding="utf-8")
      boxes = text.count('<g class="node')
      ratio = best_cpu * PER / n / BUDGET_S
      worst = max(worst, ratio)
      print(f"{name:8s} {fmt:4s} {n:>7,} nodes  {best_cpu:5.2f} s CPU  (wall {best_wall:5.2f} s)  "
            f"{boxes:>5,} boxes  {len(text) / 1e6:5.2f} MB  ratio to budget {ratio:.2f}")
    if profile:
      pr = cProfile.Profile(); pr.enable(); cli(["show", path, "-o", os.path.join(d, "p.svg")]); pr.disable()
      pstats.Stats(pr).sort_stats("cumtime").print_stats(18)
  return worst


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--nodes", type=int, default=PER)
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--profile", action="store_true")
  a = ap.parse_args()
  worst = 0.0
  for name, make in (("chain", chain), ("wide", wide_dag), ("program", program), ("kernels", kernels)):
    worst = max(worst, measure(name, make(a.nodes), a.repeat, a.profile))
  print(f"worst ratio to the {BUDGET_S:.0f} s budget per {PER:,} nodes: {worst:.2f}")


if __name__ == "__main__":
  main()
