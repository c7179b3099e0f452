"""Validator speed: load and validate 100,000-node graphs, against a 1-second budget.

Two graphs: a chain (each node uses the one before it, the worst case for recursion) and
a wide random DAG of mixed ops (sources, movement, elementwise, reduce, casts) whose
nodes pick their sources among all earlier ones. Prints nodes per second and the ratio
of the time taken to the budget (below 1.0 is within budget). Times are CPU seconds of
this process (best of --repeat), so other jobs on a shared machine do not inflate them;
the wall time is printed too.

  .venv/bin/python bench/bench_validate.py [--nodes N] [--repeat R] [--profile]
"""
from __future__ import annotations
import argparse
import cProfile
import json
import os
import pstats
import random
import tempfile
import time

from tinyspec.graph import load_file          # noqa: E402
from tinyspec.validate import validate        # noqa: E402

BUDGET_S = 1.0         # per 100,000 nodes, load + validate
PER = 100_000


def chain(n: int) -> list[dict]:
  """x = CONST; then x = op(x, c) over ADD, MUL, MAX, SUB and NEG in turn."""
  nodes = [{"op": "CONST", "arg": {"value": 1.5, "dtype": "float32"}}, {"op": "CONST", "arg": {"value": 0.5, "dtype": "float32"}}]
  cycle = ("ADD", "MUL", "MAX", "SUB", "NEG")
  while len(nodes) < n:
    op = cycle[len(nodes) % len(cycle)]
    prev = len(nodes) - 1
    nodes.append({"op": op, "src": [prev] if op == "NEG" else [prev, 1]})
  return nodes


def wide_dag(n: int, seed: int = 0) -> list[dict]:
  """A random valid DAG: every new node draws its sources from all earlier nodes of a
  fitting dtype and shape (pools keyed by (dtype, shape))."""
  rnd = random.Random(seed)
  nodes: list[dict] = []
  pools: dict[tuple, list[int]] = {}
  shape_nodes: dict[tuple, int] = {}

  def add(node, dtype, shape):
    nodes.append(node); i = len(nodes) - 1
    pools.setdefault((dtype, shape), []).append(i)
    return i

  def shape_of(dims):
    if dims not in shape_nodes:
      nodes.append({"op": "VCONST", "arg": {"values": list(dims), "dtype": "index"}}); shape_nodes[dims] = len(nodes) - 1
    return shape_nodes[dims]

  def pick(dtype, shape):
    p = pools.get((dtype, shape))
    return rnd.choice(p) if p else None

  shapes = [(3, 4), (4, 3), (1, 4), (4,), ()]
  for dt in ("float32", "int32"):
    for sh in shapes:
      for _slot in range(2):
        add({"op": "BUFFER", "src": [shape_of(sh)], "arg": {"slot": len(nodes), "dtype": dt, "device": "CPU"}}, dt, sh)
  while len(nodes) < n:
    kind = rnd.random()
    dt = rnd.choice(("float32", "int32"))
    sh = rnd.choice(shapes)
    if kind < 0.10:
      v = rnd.uniform(-4, 4) if dt == "float32" else rnd.randint(-100, 100)
      add({"op": "CONST", "arg": {"value": v, "dtype": dt}}, dt, ())
    elif kind < 0.55:
      a, b = pick(dt, sh), pick(dt, rnd.choice((sh, ())))
      if a is None or b is None: continue
      op = rnd.choice(("ADD", "MUL", "MAX", "SUB") + (("DIV",) if dt == "float32" else ("IDIV", "MOD", "AND")))
      add({"op": op, "src": [a, b]}, dt, sh)
    elif kind < 0.62:
      a = pick(dt, sh)
      if a is None: continue
      add({"op": rnd.choice(("NEG", "RECIP", "EXP2") if dt == "float32" else ("NEG",)), "src": [a]}, dt, sh)
    elif kind < 0.70:
      a, b = pick(dt, sh), pick(dt, sh)
      if a is None or b is None: continue
      c = add({"op": "CMPLT", "src": [a, b]}, "bool", sh)
      add({"op": "WHERE", "src": [c, b, a]}, dt, sh)
    elif kind < 0.76:
      a = pick(dt, sh)
      if a is None: continue
      to = "int32" if dt == "float32" else "float32"
      add({"op": "CAST", "src": [a], "arg": to}, to, sh)
    elif kind < 0.84:
      a = pick(dt, (3, 4)) if rnd.random() < 0.5 else pick(dt, (4, 3))
      if a is None: continue
      src_sh = (3, 4) if nodes[a] and (dt, (3, 4)) in pools and a in pools[(dt, (3, 4))] else (4, 3)
      to = src_sh[::-1]
      if rnd.random() < 0.5: add({"op": "PERMUTE", "src": [a], "arg": [1, 0]}, dt, to)
      else: add({"op": "RESHAPE", "src": [a, shape_of(to)]}, dt, to)
    elif kind < 0.92:
      a = pick(dt, (1, 4))
      if a is None: continue
      add({"op": "EXPAND", "src": [a, shape_of((3, 4))]}, dt, (3, 4))
    else:
      a = pick(dt, (3, 4))
      if a is None: continue
      add({"op": "REDUCE", "src": [a], "arg": {"op": rnd.choice(("ADD", "MAX")), "axes": [0]}}, dt, (1, 4))
  return nodes[:n]


def measure(name: str, nodes: list[dict], repeat: int, profile: bool) -> float:
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, f"{name}.json")
    with open(path, "w") as f: json.dump({"format": "tinyspec-graph", "version": 1, "nodes": nodes}, f)
    size = os.path.getsize(path)
    best_load = best_val = best_wall = float("inf")
    for _ in range(repeat):
      w0 = time.perf_counter()
      t0 = time.process_time(); g, diags = load_file(path); t1 = time.process_time()
      assert g is not None and not diags, diags[:3]
      res = validate(g, file=path); t2 = time.process_time()
      best_wall = min(best_wall, time.perf_counter() - w0)
      assert res.ok, [x.format() for x in res.diagnostics[:5]]
      best_load, best_val = min(best_load, t1 - t0), min(best_val, t2 - t1)
      del g, res
    if profile:
      g, _ = load_file(path)
      pr = cProfile.Profile(); pr.enable(); validate(g, file=path); pr.disable()
      pstats.Stats(pr).sort_stats("tottime").print_stats(12)
  n = len(nodes)
  total = best_load + best_val
  scaled = total * PER / n
  print(f"{name:9s} {n:>7,} nodes {size / 1e6:4.1f} MB  load {best_load:5.3f} s  validate {best_val:5.3f} s  "
        f"({n / best_val:>9,.0f} nodes/s validate, {n / total:>9,.0f} nodes/s load+validate; wall {best_wall:5.3f} s)  "
        f"ratio to budget {scaled / BUDGET_S:.2f}")
  return scaled / BUDGET_S


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--nodes", type=int, default=PER)
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--profile", action="store_true", help="print a cProfile of one validate() per graph")
  a = ap.parse_args()
  print(f"budget: {BUDGET_S:.1f} s per {PER:,} nodes for load + validate (ratio < 1.00 is within budget); CPU time, best of {a.repeat}")
  ratios = [measure("chain", chain(a.nodes), a.repeat, a.profile), measure("wide-dag", wide_dag(a.nodes), a.repeat, a.profile)]
  print(f"worst ratio to budget: {max(ratios):.2f}")


if __name__ == "__main__":
  main()
