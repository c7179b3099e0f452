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
