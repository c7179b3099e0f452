"""`tinyspec new-backend --lang c|python DIR`: a starter backend to grow, written into DIR.

  tinyspec new-backend --lang c mine && cd mine && make && tinyspec conformance -k ADD

DIR gets the backend's source (conformance/examples/<lang>/: a C program with inline
arrays and a tiny JSON reader, or Python with NumPy), its manifest, a README, a
pyproject.toml whose [tool.tinyspec] names the backend (so `tinyspec conformance`,
`tinyspec run --case` and pytest run it from anywhere in DIR) and test_conformance.py (the
corpus as the project's pytest tests). DIR must be new or empty: nothing is overwritten.
Exit 0 written, 2 bad usage or a folder that cannot be written.
"""
from __future__ import annotations
import shlex
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_UNREADABLE
from tinyspec.files import FileRefused, make_dir, output_path, printable, write_file

STARTERS = Path(__file__).resolve().parent / "examples"
FILES = {"c": ["backend.c", "Makefile", "manifest.yaml", "README.md"], "python": ["backend.py", "manifest.yaml", "README.md"]}
COMMAND = {"c": "cmd:./backend", "python": f"cmd:{shlex.quote(sys.executable)} backend.py"}   # run in DIR (its pyproject's folder)
NEXT = {"c": ["cd {dir}", "make                            # or: cc -O2 -o backend backend.c -lm", "tinyspec conformance -k ADD"],
        "python": ["cd {dir}", "tinyspec conformance -k ADD"]}


def pyproject(lang: str) -> str:
  return ("# tinyspec reads [tool.tinyspec] here: `tinyspec conformance`, `tinyspec run --case` and pytest (test_conformance.py)\n"
          "# run this backend, in this folder, from anywhere below it.\n"
          "[tool.tinyspec]\n"
          f"backend = {_toml_string(COMMAND[lang])}\n")


def _toml_string(s: str) -> str:
  return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_starter(lang: str, folder: Path) -> list[Path]:
  """The starter of `lang` written into folder (created; FileRefused where it holds anything
  already or cannot be written). The files written."""
  d = make_dir(folder)
  try: present = next(d.iterdir(), None)
  except OSError as e: raise FileRefused(folder, "path.write", f"cannot list the folder: {e.strerror or e}") from None
  if present is not None: raise FileRefused(folder, "path.write", "the folder is not empty: new-backend writes into a new or empty one")
  texts = {name: (STARTERS / lang / name).read_bytes() for name in FILES[lang]}
  texts["pyproject.toml"] = pyproject(lang).encode()
  texts["test_conformance.py"] = (STARTERS / "corpus_tests.py").read_bytes()
  written = []
  for name, data in texts.items(): written.append(write_file(output_path(d, name, "", "file name"), data))
  return written


def new_backend_command(sub):
  p = sub.add_parser("new-backend", help="write a starter backend (C or Python) that passes the ADD cases",
                     description="Write a starter backend into DIR (new or empty): its source, manifest and README, a "
                                 "pyproject.toml whose [tool.tinyspec] names it, and test_conformance.py for pytest. The C "
                                 "one reads and writes arrays inline (no .npy code) and builds with cc; the Python one uses "
                                 "NumPy. Both pass `tinyspec conformance -k ADD` as written. Exit 0 written, 2 bad usage or "
                                 "a folder that cannot be written.")
  p.add_argument("dir", metavar="DIR", type=Path, help="the folder to write (created; must be empty)")
  p.add_argument("--lang", choices=sorted(FILES), required=True, help="the language of the backend")

  def run(a) -> int:
    try: written = write_starter(a.lang, a.dir)
    except FileRefused as e:
      print(printable(f"tinyspec new-backend: {e}"), file=sys.stderr); return e.exit_code or EXIT_UNREADABLE
    for w in written: print(printable(f"wrote {w}"))
    print("next:\n" + "\n".join("  " + line.format(dir=shlex.quote(str(a.dir))) for line in NEXT[a.lang]))
    return EXIT_OK
  return p, run
