"""Expected failures of a backend, as data: conformance/manifests/<backend>.yaml.

    # why each entry is a real, documented limitation of the backend
    expected_failures:
      "WMMA/*": "tensor cores are not rendered (docs/...)"

`expected_failures` is the only key; any other (a misspelling such as `expected_failure`)
is refused, naming it with a did-you-mean, so that a manifest never silently expects nothing.
A key of it is a case id or a glob over case ids (`*`, `?`); the value says why. A case that
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
KEYS = ("expected_failures",)   # what a manifest may say


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
  from tinyspec.files import read_text, check_name, FileRefused
  from tinyspec.limits import limits
  if path is None and backend:
    try: check_name(backend, "backend name")
    except FileRefused as e: raise ManifestError(str(e)) from None
  p = Path(path) if path is not None else (MANIFEST_DIR / f"{backend}.yaml" if backend else None)
  if p is None or not p.exists():
    if path is not None: raise ManifestError(f"{path}: no such manifest")
    return Manifest(p)
  try: d = yaml.safe_load(read_text(p, limits().max_small_file, "the manifest"))
  except FileRefused as e: raise ManifestError(str(e)) from None
  except (yaml.YAMLError, RecursionError, ValueError) as e: raise ManifestError(f"{p}: cannot be read: {str(e)[:300]} [file.parse]") from None
  d = {} if d is None else d
  if isinstance(d, dict):
    for k in d:
      if k not in KEYS: raise ManifestError(f"{p}: unknown key {str(k)[:80]!r}{_did_you_mean(str(k))} (a manifest holds only {', '.join(KEYS)}) [file.schema]")
  xf = d.get("expected_failures") or {} if isinstance(d, dict) else None
  if not isinstance(xf, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in xf.items()):
    raise ManifestError(f"{p}: expected `expected_failures: {{case pattern: reason}}` with a reason for every entry [file.schema]")
  return Manifest(p, dict(xf))


def _did_you_mean(key: str) -> str:
  import difflib
  near = difflib.get_close_matches(key.lower().replace("-", "_").replace(" ", "_"), KEYS, n=1, cutoff=0.6)
  return f"; did you mean {near[0]!r}?" if near else ""
