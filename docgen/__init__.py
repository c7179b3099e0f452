"""The spec documents, generated from the tables: docs/spec.md, docs/spec.tex, docs/status.md,
and the backend author's manual docs/protocol.md (from spec/protocol.schema.json).

  tinyspec docs --out DIR [--check]       # an installed user
  python tools/gen_docs.py [--check]      # the repository's docs/ (the script calls main())

The output is deterministic: ordered as the tables order things (sorted elsewhere), no
timestamps, and independent of optional packages (tinygrad, pyopencl) being installed.
The renderers work on any `Tables` object, so a table with a new op is documented and
counted without code changes.
"""
from __future__ import annotations
import difflib
from pathlib import Path
import sys
from tinyspec.docgen.md import render_spec_md
from tinyspec.docgen.tex import render_spec_tex
from tinyspec.docgen.status import render_status_md
from tinyspec.docgen.corpus import corpus_root
from tinyspec.docgen.protocol import render_protocol_md
from tinyspec.tables import tables as shipped
from tinyspec.files import FileRefused, read_text, make_dir, output_path, write_file

__all__ = ["render_spec_md", "render_spec_tex", "render_status_md", "render_protocol_md", "render_all", "stale", "write", "corpus_root", "docs_command"]

DIFF_LINES = 40   # lines of diff shown per stale file


def render_all(tables=None, root: Path | str | None = None) -> dict[str, str]:
  """File name (relative to docs/) -> its contents. `root` holds conformance/ (the corpora)
  and docs/conformance-results.json; default: the checkout or the installed package."""
  T = tables or shipped()
  root = Path(root) if root is not None else corpus_root()
  return {"spec.md": render_spec_md(T, root), "spec.tex": render_spec_tex(T), "status.md": render_status_md(T, root),
          "protocol.md": render_protocol_md(T)}


def _shown(p: Path) -> str:
  try: return str(p.resolve().relative_to(Path.cwd()))
  except ValueError: return str(p)


def _committed(p: Path, text: str) -> str:
  """The file at p as text ("" if missing; read as a regular file, and only as far as
  needed: a file much longer than `text` differs from it anyway)."""
  try:
    if not p.exists(): return ""
    return read_text(p, limit=2 * len(text.encode()) + (1 << 20))
  except FileRefused as e: return f"({e})"
  except OSError as e: return f"({p}: {e.strerror})"     # a name too long, a folder that cannot be searched


def stale(docs: dict[str, str], out: Path) -> list[tuple[str, list[str]]]:
  """(name, diff lines) for each file under out that differs from what the tables give."""
  bad = []
  for name, text in docs.items():
    p = out / name
    old = _committed(p, text)
    if old != text:
      diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(), f"{_shown(p)} (committed)", f"{_shown(p)} (from the tables)", lineterm="", n=1))
      bad.append((name, diff))
  return bad


def write(out: Path, check: bool, root: Path | None = None, hint: str = "tinyspec docs") -> int:
  """Write the documents into `out` (or, with check, report the stale ones). Exit code."""
  docs = render_all(root=root)
  if check:
    bad = stale(docs, out)
    for name, diff in bad:
      print(f"{_shown(out / name)} is stale ({len(diff)} diff lines); run: {hint}")
      print("\n".join(diff[:DIFF_LINES]) + ("\n..." if len(diff) > DIFF_LINES else ""))
    if not bad: print(f"{', '.join(docs)} in {_shown(out)} are up to date")
    return 1 if bad else 0
  make_dir(out)
  for name, text in docs.items():
    p = output_path(out, name, what="document name")
    if _committed(p, text) != text:
      write_file(p, text); print(f"wrote {_shown(p)}")   # through a temporary name: a planted link is replaced, not followed
  return 0


def docs_command(sub):
  p = sub.add_parser("docs", help="write the spec documents (spec.md, spec.tex, status.md) and the backend protocol (protocol.md)",
                     description="Generate spec.md, spec.tex and status.md from the installed tables, and protocol.md (the "
                                 "backend protocol: every message and key, a worked session, the array encodings, limits and "
                                 "errors) from its schema, into --out. With --check, write nothing and exit 1 if a file there differs.")
  p.add_argument("--out", type=Path, default=Path("docs"), help="folder to write (default ./docs)")
  p.add_argument("--check", action="store_true", help="do not write; exit 1 if any file differs from what the tables give")

  def run(a) -> int:
    try: return write(a.out, a.check)
    except FileRefused as e:
      print(f"tinyspec docs: {e}", file=sys.stderr)
      return e.exit_code
    except OSError as e:   # what make_dir and output_path do not catch (a name too long for the file system)
      print(f"tinyspec docs: {a.out}: {e.strerror or e} [path.write]", file=sys.stderr)
      return 2
  return p, run
