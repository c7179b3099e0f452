"""Write docs/spec.md, docs/spec.tex and docs/status.md from the tables (and, for
status.md, from the code and the conformance corpus).

  python tools/gen_docs.py             # write docs/
  python tools/gen_docs.py --check     # exit 1, naming the stale files with a short diff, if docs/ is out of date
  python tools/gen_docs.py --out DIR   # write (or --check) DIR instead of docs/

The output is deterministic: ordered as the tables order things (sorted elsewhere), no
timestamps, and independent of optional packages (tinygrad, pyopencl) being installed.
The renderers work on any `Tables` object, so a table with a new op is documented and
counted without code changes:

  from tools.gen_docs import render_spec_md, render_spec_tex, render_status_md
"""
from __future__ import annotations
import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))   # run as a script without the package installed

from tools.docs_md import render_spec_md            # noqa: E402
from tools.docs_tex import render_spec_tex          # noqa: E402
from tools.docs_status import render_status_md      # noqa: E402

__all__ = ["render_spec_md", "render_spec_tex", "render_status_md", "render_all", "main"]

DIFF_LINES = 40   # lines of diff shown per stale file


def render_all(tables=None, root: Path | str = ROOT) -> dict[str, str]:
  """File name (relative to docs/) -> its contents."""
  from tinyspec.tables import tables as shipped
  T = tables or shipped()
  return {"spec.md": render_spec_md(T, root), "spec.tex": render_spec_tex(T), "status.md": render_status_md(T, root)}


def _shown(p: Path) -> str:
  try: return str(p.resolve().relative_to(Path.cwd()))
  except ValueError: return str(p)


def stale(docs: dict[str, str], out: Path) -> list[tuple[str, list[str]]]:
  """(name, diff lines) for each file under out that differs from what the tables give."""
  bad = []
  for name, text in docs.items():
    p = out / name
    old = p.read_text(encoding="utf-8") if p.is_file() else ""
    if old != text:
      diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), f"{_shown(p)} (committed)", f"{_shown(p)} (from the tables)", lineterm="", n=1))
      bad.append((name, diff))
  return bad


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="gen_docs.py", description="Generate docs/spec.md, docs/spec.tex and docs/status.md from the tables.")
  ap.add_argument("--check", action="store_true", help="do not write; exit 1 if any file differs from what the tables give")
  ap.add_argument("--out", type=Path, default=ROOT / "docs", help="folder to write (default: docs/)")
  a = ap.parse_args(argv)
  docs = render_all()
  if a.check:
    bad = stale(docs, a.out)
    for name, diff in bad:
      print(f"{_shown(a.out / name)} is stale ({len(diff)} diff lines); run: python tools/gen_docs.py")
      print("\n".join(diff[:DIFF_LINES]) + ("\n..." if len(diff) > DIFF_LINES else ""))
    if not bad: print(f"{', '.join(docs)} in {_shown(a.out)} are up to date")
    return 1 if bad else 0
  a.out.mkdir(parents=True, exist_ok=True)
  for name, text in docs.items():
    p = a.out / name
    if not p.is_file() or p.read_text(encoding="utf-8") != text:
      p.write_text(text, encoding="utf-8"); print(f"wrote {_shown(p)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
