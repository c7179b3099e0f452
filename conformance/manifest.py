"""Expected failures of a backend, as data: conformance/manifests/<backend>.yaml.

    # why each entry is a real, documented limitation of the backend
    expected_failures:
      "WMMA/*": "tensor cores are not rendered (docs/...)"

A key is a case id or a glob over case ids (`*`, `?`); the value says why. A case that
matches and fails is an expected failure (xfail); one that matches and passes is an
unexpected pass (xpass), reported and counted against the run (strict xfail), so that a
fixed limitation is taken out of the manifest.
"""
from __future__ import annotations
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
import yaml

MANIFEST_DIR = Path(__file__).resolve().parent / "manifests"


class ManifestError(Exception):
  pass


@dataclass
class Manifest:
  path: Path | None = None
  expected_failures: dict = field(default_factory=dict)   # pattern -> reason

  def reason(self, case_id: str) -> str | None:
    for pat, why in self.expected_failures.items():
      if case_id == pat or fnmatch.fnmatchcase(case_id, pat): return str(why)
    return None

  def unused(self, case_ids) -> list[str]:
    """Entries that match none of the given case ids (stale ones)."""
    ids = list(case_ids)
    return [p for p in self.expected_failures if not any(i == p or fnmatch.fnmatchcase(i, p) for i in ids)]


def load_manifest(backend: str | None = None, path: Path | str | None = None) -> Manifest:
  """The manifest at path, else conformance/manifests/<backend>.yaml, else an empty one."""
  p = Path(path) if path is not None else (MANIFEST_DIR / f"{backend}.yaml" if backend else None)
  if p is None or not p.is_file():
    if path is not None: raise ManifestError(f"{path}: no such manifest")
    return Manifest(p)
  try: d = yaml.safe_load(p.read_text()) or {}
  except (OSError, yaml.YAMLError) as e: raise ManifestError(f"{p}: cannot be read: {e}") from None
  xf = d.get("expected_failures") or {}
  if not isinstance(d, dict) or not isinstance(xf, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in xf.items()):
    raise ManifestError(f"{p}: expected `expected_failures: {{case pattern: reason}}` with a reason for every entry")
  return Manifest(p, dict(xf))
