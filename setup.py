"""Packaging: the repository's top-level folders install as subpackages of `tinyspec`.

pyproject.toml holds the metadata; this file only computes the package list, which
setuptools cannot do for mapped folders: every folder below a mapped one is listed as a
package too (the corpora's data folders included), so that their files ship as package
data without setuptools warning that a data folder "is absent from the packages
configuration".
"""
from pathlib import Path
from setuptools import setup

FOLDERS = {   # installed package -> the repository folder it is built from
  "tinyspec": "tinyspec",
  "tinyspec.spec": "spec",
  "tinyspec.refimpl": "refimpl",
  "tinyspec.compiler": "compiler",
  "tinyspec.conformance": "conformance",
  "tinyspec.interop": "interop",
  "tinyspec.show": "show",
  "tinyspec.docgen": "docgen",
}


def packages() -> list[str]:
  out = []
  for pkg, folder in FOLDERS.items():
    root = Path(__file__).resolve().parent / folder
    for d in sorted([root, *(p for p in root.rglob("*") if p.is_dir())]):
      rel = d.relative_to(root).parts
      if not all(part.isidentifier() for part in rel) or "__pycache__" in rel: continue   # not importable: plain data
      if pkg == "tinyspec" and rel and rel[0] in {v for k, v in FOLDERS.items() if k != "tinyspec"}: continue
      out.append(".".join((pkg, *rel)))
  return out


setup(packages=packages(), package_dir=FOLDERS)
