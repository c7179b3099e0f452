"""Writes the case corpus conformance/cases/ (layout: conformance/cases/README.md).

  .venv/bin/python tools/gen_cases.py            # rewrite conformance/cases/
  .venv/bin/python tools/gen_cases.py --check    # regenerate into a temporary folder; exit 1
                                                 # if any file would change (expected values
                                                 # moved: a new NumPy, an evaluator change)

The cases come from the tables (conformance/corpus/casegen.py says how); the expected outputs
are computed once by the reference evaluator and pinned by the sha256 in each case.json,
so --check (run by the test suite) notices any change of an expected value.
"""
from __future__ import annotations
import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path
if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()
from tinyspec.conformance.corpus.casegen import write_corpus  # noqa: E402 (after use_checkout)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "conformance" / "cases"
KEEP = {"README.md"}   # files of the corpus folder that the script does not write


def _files(root: Path) -> set[str]:
  return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name not in KEEP}


def diff(a: Path, b: Path) -> list[str]:
  """What differs between two corpus folders (missing, extra, changed files)."""
  fa, fb = _files(a), _files(b)
  out = [f"missing: {f}" for f in sorted(fb - fa)] + [f"stale: {f}" for f in sorted(fa - fb)]
  out += [f"changed: {f}" for f in sorted(fa & fb) if not filecmp.cmp(a / f, b / f, shallow=False)]
  return out


def generate(dest: Path, log=print) -> int:
  return write_corpus(dest, log=lambda m: log(f"gen_cases: {m}"))


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--check", action="store_true", help="exit 1 if conformance/cases/ differs from what this script writes")
  ap.add_argument("--out", type=Path, default=OUT, help="the corpus folder (default conformance/cases)")
  a = ap.parse_args(argv)
  with tempfile.TemporaryDirectory() as tmp:
    fresh = Path(tmp) / "cases"
    fresh.mkdir()
    n = generate(fresh, log=lambda m: print(m, file=sys.stderr))
    if a.check:
      d = diff(a.out, fresh) if a.out.is_dir() else [f"missing: {a.out}"]
      if d:
        print(f"gen_cases: {a.out} is stale ({len(d)} files differ; run tools/gen_cases.py):", file=sys.stderr)
        for line in d[:20]: print(f"  {line}", file=sys.stderr)
        return 1
      print(f"gen_cases: {a.out} is up to date ({n} cases)")
      return 0
    a.out.mkdir(parents=True, exist_ok=True)
    for p in sorted(a.out.iterdir()):
      if p.name in KEEP: continue
      shutil.rmtree(p) if p.is_dir() else p.unlink()
    for p in sorted(fresh.iterdir()): shutil.move(str(p), a.out / p.name)
  print(f"gen_cases: wrote {n} cases to {a.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
