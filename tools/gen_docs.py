"""Write the repository's docs/spec.md, docs/spec.tex and docs/status.md from the tables
(and, for status.md, from the code, the corpus and docs/conformance-results.json), and
docs/protocol.md from spec/protocol.schema.json.

  python tools/gen_docs.py             # write docs/
  python tools/gen_docs.py --check     # exit 1, naming the stale files with a short diff, if docs/ is out of date
  python tools/gen_docs.py --out DIR   # write (or --check) DIR instead of docs/

The generator itself is tinyspec.docgen (installed users run `tinyspec docs`).
"""
from __future__ import annotations
import argparse
import sys
from pathlib import Path
if __name__ == "__main__":   # run as a script: a plain checkout works too (tools/checkout.py)
  import checkout
  checkout.use_checkout()
from tinyspec.docgen import write  # noqa: E402 (after use_checkout)

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="gen_docs.py", description="Generate docs/spec.md, docs/spec.tex, docs/status.md and docs/protocol.md from the tables.")
  ap.add_argument("--check", action="store_true", help="do not write; exit 1 if any file differs from what the tables give")
  ap.add_argument("--out", type=Path, default=ROOT / "docs", help="folder to write (default: docs/)")
  a = ap.parse_args(argv)
  return write(a.out, a.check, root=ROOT, hint="python tools/gen_docs.py")


if __name__ == "__main__":
  sys.exit(main())
