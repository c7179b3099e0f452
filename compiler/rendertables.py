"""spec/render.yaml, loaded once: the compiler's lowering policy and render rules."""
from __future__ import annotations
from functools import lru_cache
import yaml
from tinyspec import spec
from tinyspec.tables import tables


@lru_cache(maxsize=None)
def render_tables() -> dict:
  with open(spec.path("render.yaml")) as f: t = yaml.safe_load(f)
  for cases in t.get("ops", {}).values():   # YAML 1.1 reads the key `on` as true: give the rule's key back
    for c in cases:
      if True in c: c["on"] = c.pop(True)
  return t


def policy(key: str) -> frozenset[str]:
  """An op set from the `schedule:` section."""
  return frozenset(render_tables()["schedule"].get(key, ()))


def category(op: str) -> str: return tables().ops[op].category


def is_alu(op: str) -> bool:
  """Elementwise (primitive or decomposed): applied per element with broadcasting."""
  return category(op) in ("elementwise", "decomposed")
