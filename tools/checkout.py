"""Lets a tools/ script run from a plain checkout, tinyspec not installed (say
`python3 tools/gen_docs.py --check` with the dependencies but no .venv): the repository's
folders are imported as the tinyspec.* packages that setup.py's FOLDERS builds from them.
Where tinyspec is installed (the .venv's editable install, a wheel) nothing changes."""
from __future__ import annotations
import ast
import importlib.abc
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def folders() -> dict:
  """setup.py's FOLDERS (package -> repository folder), read without running setup.py."""
  for node in ast.parse((ROOT / "setup.py").read_text()).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FOLDERS" for t in node.targets):
      return ast.literal_eval(node.value)
  raise RuntimeError("setup.py defines no FOLDERS")


class CheckoutFinder(importlib.abc.MetaPathFinder):
  """Finds tinyspec and its mapped subpackages in their repository folders."""
  def __init__(self, mapping: dict):
    self.mapping = mapping

  def find_spec(self, name, path=None, target=None):
    folder = self.mapping.get(name)
    if folder is None: return None
    d = ROOT / folder
    return importlib.util.spec_from_file_location(name, d / "__init__.py", submodule_search_locations=[str(d)])


def use_checkout() -> None:
  if importlib.util.find_spec("tinyspec") is None and not any(isinstance(f, CheckoutFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, CheckoutFinder(folders()))
