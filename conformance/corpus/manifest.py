"""Expected failures and exclusions of a backend, as data.

    # why each entry is a real, documented limitation of the backend
    expected_failures:
      "WMMA/*": "tensor cores are not rendered (docs/...)"
    exclude:
      "REDUCE/float64-big": "hangs the backend (issue 12): not run at all"

`expected_failures` and `exclude` are the only keys; any other (a misspelling such as
`expected_failure`) is refused, naming it with a did-you-mean, so that a manifest never
silently expects nothing. A key of either is a case id or a glob over case ids (`*`, `?`);
the value says why. A case that matches `expected_failures` and fails is an expected
failure (xfail); one that matches and passes is an unexpected pass (xpass), reported and
counted against the run (strict xfail), so that a fixed limitation is taken out of the
manifest. A case that matches `exclude` is not run at all (status skip, with the reason):
a case that hangs a backend does not cost its timeout on every run.

Which manifest a backend gets (the first that applies, `find_manifest`): `--manifest FILE`;
(`--manifest none` or /dev/null: none); the project's `[tool.tinyspec.manifests]` entry for the backend's name
(conformance/run/settings.py); the manifest the backend names itself (`manifest` in its hello,
relative to where the backend's program lives); the shipped
conformance/manifests/<backend>.yaml; none.
"""
from __future__ import annotations
import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
import difflib
import yaml
from tinyspec.files import read_text, check_name, FileRefused
from tinyspec.limits import limits

MANIFEST_DIR = Path(__file__).resolve().parent.parent / "manifests"
KEYS = ("expected_failures", "exclude")   # what a manifest may say
NO_MANIFEST = ("none", os.devnull)        # `--manifest none` (or /dev/null): run without one


class ManifestError(Exception):
  pass


@dataclass
class Manifest:
  path: Path | None = None
  expected_failures: dict = field(default_factory=dict)   # pattern -> reason
  exclude: dict = field(default_factory=dict)             # pattern -> reason: not run

  def reason(self, case_id: str) -> str | None:
    """Why the case is expected to fail, or None."""
    return _first(self.expected_failures, case_id)

  def excluded(self, case_id: str) -> str | None:
    """Why the case is not run at all, or None."""
    return _first(self.exclude, case_id)

  def unused(self, case_ids) -> list[str]:
    """Entries (of either list) that match none of the given case ids (stale ones)."""
    ids = list(case_ids)
    return [p for p in (*self.expected_failures, *self.exclude) if not any(i == p or fnmatch.fnmatchcase(i, p) for i in ids)]


def _first(patterns: dict, case_id: str) -> str | None:
  for pat, why in patterns.items():
    if case_id == pat or fnmatch.fnmatchcase(case_id, pat): return str(why)
  return None


def load_manifest(backend: str | None = None, path: Path | str | None = None) -> Manifest:
  """The manifest at path, else conformance/manifests/<backend>.yaml, else an empty one."""
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
  if not isinstance(d, dict): raise ManifestError(f"{p}: a manifest is a mapping of {' and '.join(KEYS)} [file.schema]")
  lists = {}
  for key in KEYS:
    v = d.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(w, str) and w.strip() for k, w in v.items()):
      raise ManifestError(f"{p}: expected `{key}: {{case pattern: reason}}` with a reason for every entry [file.schema]")
    lists[key] = dict(v)
  return Manifest(p, lists["expected_failures"], lists["exclude"])


def find_manifest(name: str, explicit=None, project: dict | None = None, own=None) -> Manifest:
  """The manifest of the backend `name` (the name its results go by): `explicit` (a
  --manifest; NO_MANIFEST: an empty one), else project[name] ([tool.tinyspec.manifests]),
  else `own` (the absolute path the backend names), else the shipped one, else an empty
  one. ManifestError for a named file that is missing or malformed."""
  if explicit is not None and str(explicit) in NO_MANIFEST: return Manifest()
  for path in (explicit, (project or {}).get(name), own):
    if path is not None: return load_manifest(name, path)
  return load_manifest(name)


def _did_you_mean(key: str) -> str:
  near = difflib.get_close_matches(key.lower().replace("-", "_").replace(" ", "_"), KEYS, n=1, cutoff=0.6)
  return f"; did you mean {near[0]!r}?" if near else ""
