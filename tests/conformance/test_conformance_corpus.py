"""The case corpus conformance/cases: it is what tools/gen_cases.py writes (the expected
values are pinned: --check fails when one moves), it covers every op with tensor- or
kernel-level semantics in every dtype the tables allow and every rule id with a negative
case, it can be read with json, hashlib and NumPy alone, and it stays small."""
from __future__ import annotations
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest
from tinyspec.tables import tables
from tinyspec.conformance.corpus.cases import load_cases, CASES_DIR, digest_of
from tinyspec.conformance.corpus import casegen
from conftest import tool

ROOT = Path(__file__).resolve().parents[2]
CASES = load_cases()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
  d = tmp_path_factory.mktemp("cases") / "cases"
  d.mkdir()
  tool("gen_cases").generate(d, log=lambda m: None)
  return d


def test_the_corpus_is_what_the_generator_writes(fresh):
  assert tool("gen_cases").diff(CASES_DIR, fresh) == [], "conformance/cases is stale: run tools/gen_cases.py"


def test_check_fails_when_an_expected_value_moved(fresh, tmp_path, monkeypatch, capsys):
  G = tool("gen_cases")
  # on the ADD cases only (copying the whole corpus twice would be slow): the generator's
  # fresh output against a copy with one expected value moved
  good, moved = tmp_path / "good", tmp_path / "moved"
  shutil.copytree(fresh / "ADD", good / "ADD")
  shutil.copytree(fresh / "ADD", moved / "ADD")
  f = moved / "ADD" / "int32" / "out.out0.npy"
  a = np.load(f); a[0] += 1; np.save(f, a)
  monkeypatch.setattr(G, "generate", lambda dest, log=print: (shutil.copytree(good, dest, dirs_exist_ok=True), 1)[1])
  assert G.main(["--check", "--out", str(moved)]) == 1
  assert "changed: ADD/int32/out.out0.npy" in capsys.readouterr().err
  assert G.main(["--check", "--out", str(good)]) == 0


def test_every_op_in_every_allowed_dtype_has_a_positive_case():
  covered = {tuple(c) for case in CASES if case.kind == "positive" for c in case.covers}
  missing = []
  for op in casegen.case_ops():
    ex = tables().ops[op].example
    g = None
    if ex:
      from tinyspec.graph import from_document
      from tinyspec.validate import validate
      g, _ = from_document(ex)
      d0 = casegen._primary_dtype(g, op, validate(g).views)
    else: d0 = None
    for dt in casegen.op_dtypes(op, d0):
      if (op, dt) not in covered: missing.append(f"{op}/{dt}")
  assert not missing, f"no case for {missing}"


def test_every_rule_has_a_negative_case():
  rules = {c.expect.get("rule") for c in CASES if c.kind == "negative"}
  assert tables().rule_ids() <= rules, sorted(tables().rule_ids() - rules)


def test_every_case_names_the_ops_of_its_graph_and_its_level():
  """The README's `ops` ("every op in the graph") and `level` hold for negative cases too:
  a negative case's are its rule case's."""
  from tinyspec.graph import load_file
  from tinyspec.conformance.corpus.rulecases import load_rule_cases
  levels = {f"negative/{c.id}": c.level for c in load_rule_cases() if not c.valid}
  negatives = [c for c in CASES if c.kind == "negative"]
  assert len(negatives) == len(levels) and sum(bool(c.ops) for c in negatives) > len(negatives) // 2
  for case in negatives:
    g, _ = load_file(case.graph)   # (None for the file-level rules' unreadable graphs: no ops)
    assert case.ops == sorted({n.op for n in g.nodes} if g is not None else ()), case.id
    assert "level" in case.meta and case.level == levels[case.id], case.id


def test_cases_read_without_the_package():
  # the README's recipe: case.json, the graph, .npy arrays (bfloat16 as uint16 bits), sha256
  for case in CASES[::37] + [c for c in CASES if c.id in ('MAX/float32', 'MULACC/float32', 'CAST/float32')]:
    d = json.loads((case.dir / "case.json").read_text())
    assert d["format"] == "tinyspec-case" and d["kind"] in ("positive", "negative")
    graph = (case.dir / d["graph"]).resolve()
    h = hashlib.sha256()
    h.update(b"graph\0" + (graph.read_bytes() if graph.exists() else b""))
    files = [v["file"] for v in d["inputs"].values()] + [v["file"] for v in d["outputs"].values()]
    files += [v[k] for v in d["outputs"].values() for k in ("ulp", "ulp_decomposed") if isinstance(v.get(k), str)]
    for v in d["outputs"].values():   # the portable profile's bounds and alternative results
      p = v.get("portable", {})
      files += [p[k] for k in ("ulp", "ulp_decomposed") if isinstance(p.get(k), str) and p[k] != "inf"] + list(p.get("alternatives", ()))
    for name in sorted(set(files)):
      h.update(b"\0" + name.encode() + b"\0" + (case.dir / name).read_bytes())
      np.load(case.dir / name, allow_pickle=False)
    assert h.hexdigest() == d["sha256"], case.id


def test_hashes_pin_the_files():
  bad = [c.id for c in CASES if digest_of(c) != c.sha256]
  assert not bad, bad[:5]


def test_edge_values_are_in_the_corpus():
  x = np.load(CASES_DIR / "ADD" / "float32" / "in.buf0.npy")
  assert np.isnan(x).any() and np.isinf(x).any() and (np.signbit(x) & (x == 0)).any()
  assert ((x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)).any()               # a subnormal
  i = np.load(CASES_DIR / "ADD" / "int8" / "in.buf0.npy")
  assert i.min() == -128 and i.max() == 127
  assert any(c.id.endswith("-empty") for c in CASES) and any(c.id.endswith("-size1") for c in CASES)


def test_the_corpus_stays_small():
  size = sum(p.stat().st_size for p in CASES_DIR.rglob("*") if p.is_file())
  assert size < 5_000_000, size   # 3.4 MB before the four float8 dtypes added 260 cases (0.8 MB)


def test_the_reference_passes_a_sample_in_process():
  # the corpus through refimpl directly (no worker processes): every 7th case
  from tinyspec.graph import load_file
  from tinyspec.refimpl import evaluate
  from tinyspec.conformance.run.execute import judge_positive
  for c in [c for c in CASES if c.kind == "positive"][::7]:
    g, _ = load_file(c.graph)
    out = {k: np.asarray(v) for k, v in evaluate(g, c.load_inputs()).items()}
    from tinyspec.conformance.corpus.cases import to_disk
    disk = {k: to_disk(v, c.outputs[k].dtype) for k, v in out.items() if k in c.outputs}
    assert judge_positive(c, disk, False) is None, c.id


def _dispatch_targets() -> list[str]:
  from numpy._core import _multiarray_umath as m
  return list(getattr(m, "__cpu_dispatch__", []))


@pytest.mark.parametrize("level", ["no-avx512", "baseline"])
def test_the_corpus_is_the_same_on_other_simd_paths(level):
  """NumPy picks SIMD kernels by CPU at run time (NPY_DISABLE_CPU_FEATURES turns them off):
  with AVX-512 off (the AVX2 path), and with every dispatched target off (the baseline),
  the reference evaluator writes the committed corpus bit for bit."""
  targets = _dispatch_targets()
  off = [t for t in targets if "AVX512" in t or t == "X86_V4"] if level == "no-avx512" else targets
  if not off: pytest.skip(f"this NumPy dispatches no {level} targets ({targets})")
  env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(off)}
  r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_cases.py"), "--check"], env=env, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
