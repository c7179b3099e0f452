"""The tinyspec tables (YAML data), the graph-file and backend-protocol JSON Schemas, shipped as package data."""
from pathlib import Path

DIR = Path(__file__).resolve().parent


def path(name: str) -> Path:
  """Path of a file in the spec folder, e.g. path('ops.yaml')."""
  return DIR / name
