"""What a user of the installed wheel reads cites only what the wheel gives them (issue 32):
the package description (PACKAGE.md, pyproject's readme) names real subcommands and no
file of the repository, and the shipped docs a backend author meets (the protocol's
docstring, the conformance and case READMEs, the starter backends) cite no file the wheel
does not ship."""
from __future__ import annotations
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_FOR_AUTHORS = ["PACKAGE.md", "conformance/README.md", "conformance/cases/README.md", "conformance/run/protocol.py",
                       *[str(p.relative_to(ROOT)) for p in sorted((ROOT / "conformance" / "examples").rglob("*")) if p.is_file()]]


def test_the_package_description_is_for_an_installed_user():
  meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
  assert meta["project"]["readme"] == "PACKAGE.md"
  text = (ROOT / "PACKAGE.md").read_text()
  assert "bash " not in text and not re.search(r"\b(scripts|tools|tests|spec|refimpl|compiler|conformance|interop)/", text), \
    "the package description names a file of the repository"
  from tinyspec.cli import _commands
  named = set(re.findall(r"^\s*tinyspec ([a-z][a-z-]*)", text, re.M)) | set(re.findall(r"`tinyspec ([a-z][a-z-]*)", text))
  assert {"docs", "new-backend", "conformance", "run", "case"} <= named and named <= set(_commands()), named - set(_commands())
  assert "protocol.md" in text and "validate" in text


def test_the_docs_a_backend_author_meets_cite_only_what_ships():
  for rel in SHIPPED_FOR_AUTHORS:
    text = (ROOT / rel).read_text()
    assert "architecture.md" not in text and "conformance/examples/numpy_backend.py" not in text, rel
    assert "bash scripts/" not in text, rel


# ------------------------------------------------------------------ every file of the wheel
FOLDERS = {   # installed package -> repository folder (setup.py's mapping)
  "tinyspec": "tinyspec", "tinyspec.spec": "spec", "tinyspec.refimpl": "refimpl", "tinyspec.compiler": "compiler",
  "tinyspec.conformance": "conformance", "tinyspec.interop": "interop", "tinyspec.show": "show", "tinyspec.docgen": "docgen",
}
CITED_DOC = re.compile(r"\bdocs/([\w.-]+\.(?:md|tex))|(?<![\w/.-])(architecture\.md)\b")
# Files of refimpl/ and interop/ that other work is changing as this is written: each still
# cites a doc the wheel does not ship (the test fails once it does not: take it out then).
NOT_YET = {"refimpl/engine.py", "interop/tinygrad_backend.py", "interop/tinygrad_bugs.yaml", "interop/campaign_units.py",
           "interop/tinygrad_map.yaml", "interop/suite/diagnose.py", "interop/suite/plugin.py", "interop/suite/__init__.py",
           "interop/suite/__main__.py", "interop/suite/classes.yaml", "interop/hunt.py", "interop/README.md"}


def _folder(pkg: str) -> Path:
  top = max((p for p in FOLDERS if pkg == p or pkg.startswith(p + ".")), key=len)
  return ROOT / FOLDERS[top] / Path(*pkg[len(top):].split(".")[1:])


def shipped_files() -> list[Path]:
  """The text files the wheel holds: each package's modules (every folder below a mapped one
  whose name is an identifier is a package, as setup.py lists them) and the package data
  pyproject.toml names, and PACKAGE.md (the wheel's description)."""
  out = {ROOT / "PACKAGE.md"}
  for pkg, folder in FOLDERS.items():
    for f in (ROOT / folder).rglob("*.py"):
      rel = f.relative_to(ROOT / folder).parts
      if "__pycache__" in rel or not all(p.isidentifier() for p in rel[:-1]): continue
      if pkg == "tinyspec" and rel[0] in set(FOLDERS.values()): continue
      out.add(f)
  data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
  for pkg, patterns in data.items():
    for pattern in patterns: out |= {p for p in _folder(pkg).glob(pattern) if p.is_file() and "__pycache__" not in p.parts}
  return sorted(out)


def test_no_installed_file_cites_a_doc_the_wheel_does_not_ship():
  """Every `docs/NAME.md` (or .tex) an installed docstring, message or README cites is a page
  `tinyspec docs` writes; docs/architecture.md, the repository's own, is cited nowhere."""
  from tinyspec.docgen import render_all
  written = set(render_all())
  files = shipped_files()
  assert len(files) > 300 and ROOT / "conformance" / "run" / "protocol.py" in files and ROOT / "conformance" / "examples" / "c" / "backend.c" in files
  bad, still = [], set()
  for f in files:
    if f.suffix in (".npy", ".npz"): continue
    try: text = f.read_text()
    except UnicodeDecodeError: continue
    cited = {a or b for a, b in CITED_DOC.findall(text)} - written
    rel = f.relative_to(ROOT).as_posix()
    if cited and rel in NOT_YET: still.add(rel)
    elif cited: bad.append(f"{rel}: {', '.join(sorted(cited))}")
  assert not bad, "installed files cite docs the wheel does not ship (point to a `tinyspec docs` page or drop it):\n" + "\n".join(bad)
  assert still == NOT_YET, f"no longer cite an unshipped doc: take them out of NOT_YET: {sorted(NOT_YET - still)}"
