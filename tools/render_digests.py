"""Render the positive corpus for three devices and keep a digest of every program source,
so that a change of the compiler's inside can be shown to leave its output byte-identical.

  python tools/render_digests.py --out FILE.json [--sources DIR]    # render, write digests
  python tools/render_digests.py --check FILE.json [--sources DIR]  # render, exit 1 on any difference

tools/render_digests.json holds the digests of commit d3803cd, before the compiler became
rule sets (issue 33): `--check tools/render_digests.json` shows the sources unchanged since,
except those tools/render_digests.explained.json lists with the reason they differ
(--explained FILE; a difference it does not list fails the check).

The graphs: every positive case of conformance/cases, every valid graph of the rule corpus
(conformance/rules), and the benchmark programs (bench/bench_kernels.py's cases and
bench/gpu_programs.py's awkward sizes: the heuristics' heavy paths, tiles, staging, splits).
The devices are fixed rows, not this host, so that the digests are the same on any host:
`c` (an AVX-512 CPU, 2 threads, 32 MiB of cache), `opencl` (PoCL on that CPU, as PoCL
reports it; only the source is rendered, nothing is built or run) and `h100`
(spec/render.yaml device_tables, what TINYSPEC_OPENCL_DEVICE=table:h100 compiles for).
Each entry is the sha256 of the program source, or the rule id a refusal names. --sources
writes every source (and refusal message) under DIR/<device>/<graph>.txt for a diff.
"""
from __future__ import annotations
import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
import numpy as np
if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()
from tinyspec.compiler.device import Device, table_device  # noqa: E402 (after use_checkout)
from tinyspec.graph import load_file  # noqa: E402 (after use_checkout)
from tinyspec.conformance.corpus.cases import load_cases  # noqa: E402 (after use_checkout)
from tinyspec.conformance.corpus.rulecases import load_rule_cases  # noqa: E402 (after use_checkout)
from tinyspec.tensor import Tensor  # noqa: E402 (after use_checkout)
from tinyspec.compiler import compile_graph, CompileError  # noqa: E402 (after use_checkout)

ROOT = Path(__file__).resolve().parent.parent


def devices() -> dict:
  return {
    "c": Device("c", "digest-cpu", "cpu", 2, 0, 0, False, 64, cache_bytes=32 << 20),
    "opencl": Device("opencl", "pthread-digest-cpu", "cpu", 2, 1 << 20, 4096, False, 32),
    "h100": table_device("h100"),
  }


def corpus_graphs():
  """(name, Graph) of every positive case and every valid rule-corpus graph."""
  for c in load_cases():
    if not c.valid: continue
    g, diags = load_file(c.graph)
    if g is not None and not any(d.fatal for d in diags): yield "case/" + c.id, g
  for c in load_rule_cases():
    if not c.valid or not c.input.exists(): continue
    g, diags = load_file(c.input)
    if g is not None and not any(d.fatal for d in diags): yield "rule/" + c.id, g


def program_graphs():
  """(name, Graph) of the benchmark programs, built on zero arrays (only their shapes matter)."""
  sys.path.insert(0, str(ROOT / "bench"))
  import bench_kernels  # noqa: PLC0415 (bench/ is on the path from here; it sets DEV and OpenBLAS's variables)
  import gpu_programs  # noqa: PLC0415 (bench/ is on the path from here)

  class Zeros:   # a generator whose arrays cost no time to fill
    def standard_normal(self, shape): return np.zeros(shape, np.float32)
    def integers(self, lo, hi, shape): return np.zeros(shape, np.int64)
  def graph(build, arrays):
    return build(*[Tensor(x) for x in arrays]).graph()
  for name, arrays, build, *_ in bench_kernels.cases(Zeros(), gpu=True):
    yield "bench/" + name, graph(build, arrays)
  for name, build, arrays, _ in gpu_programs.programs(Zeros()):
    yield "gpu/" + name, graph(build, arrays)


def render_all(sources: Path | None, graphs=None) -> dict:
  """{device: {graph name: digest or refusal}} of `graphs` (default: the whole corpus)."""
  devs = devices()
  graphs = list(corpus_graphs()) + list(program_graphs()) if graphs is None else graphs
  out: dict = {name: {} for name in devs}
  for dname, dev in devs.items():
    for gname, g in graphs:
      try:
        text = compile_graph(g, dev.target, keep_stages=False, beam=0, device=dev).program_source()
        entry = hashlib.sha256(text.encode()).hexdigest()
      except CompileError as e:
        text, entry = f"refused [{e.rule}]: {e}", f"refused:{e.rule}"
      out[dname][gname] = entry
      if sources is not None:
        p = sources / dname / (gname.replace("/", "__").replace(" ", "_") + ".txt")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
  return out


def differences(want: dict, got: dict, explained: dict | None = None) -> list[str]:
  """'device graph: old -> new' for every source that differs and `explained` ({'device
  graph': why}) does not list."""
  diff = []
  for dname in sorted(set(want) | set(got)):
    a, b = want.get(dname, {}), got.get(dname, {})
    for gname in sorted(set(a) | set(b)):
      if a.get(gname) != b.get(gname) and f"{dname} {gname}" not in (explained or {}):
        diff.append(f"{dname} {gname}: {a.get(gname)} -> {b.get(gname)}")
  return diff


def load_explained(path: Path | None) -> dict:
  """{'device graph': why} from a list of {"why": ..., "sources": ["device graph", ...]}."""
  if path is None: return {}
  return {src: e["why"] for e in json.loads(path.read_text()) for src in e["sources"]}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="render_digests.py", description="Digest the rendered sources of the positive corpus (c, opencl, h100).")
  mode = ap.add_mutually_exclusive_group(required=True)
  mode.add_argument("--out", type=Path, help="write the digests to this JSON file")
  mode.add_argument("--check", type=Path, help="compare with this JSON file; exit 1 on any difference")
  ap.add_argument("--sources", type=Path, help="also write every source under this folder")
  ap.add_argument("--explained", type=Path, help="a JSON list of {why, sources}: differences that are expected, and why")
  a = ap.parse_args(argv)
  t0, c0 = time.monotonic(), time.process_time()
  got = render_all(a.sources)
  n = sum(len(v) for v in got.values())
  took = f"{time.monotonic() - t0:.0f} s ({time.process_time() - c0:.0f} s of CPU)"
  if a.out is not None:
    a.out.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    print(f"{n} sources digested in {took} -> {a.out}")
    return 0
  explained = load_explained(a.explained)
  want = json.loads(a.check.read_text())
  diff = differences(want, got, explained)
  for line in diff: print(line)
  expected = len(differences(want, got)) - len(diff)
  print(f"{n} sources rendered in {took}: {len(diff)} differ from {a.check}" + (f" ({expected} more, as {a.explained} explains)" if explained else ""))
  return 1 if diff else 0


if __name__ == "__main__":
  sys.exit(main())
