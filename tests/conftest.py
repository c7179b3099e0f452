import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TINYSPEC_CACHE", str(ROOT / ".cache" / "tinyspec"))
_TOOLS: dict = {}


def tool(name: str):
  """A script of tools/ (not an installed package) imported as a module, once."""
  if name not in _TOOLS:
    spec = importlib.util.spec_from_file_location(f"tinyspec_tool_{name}", ROOT / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _TOOLS[name] = mod
  return _TOOLS[name]
