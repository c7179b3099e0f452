"""The on-disk program cache: $TINYSPEC_CACHE (default ~/.cache/tinyspec)."""
from __future__ import annotations
import hashlib
import os
from pathlib import Path


def cache_dir(sub: str = "") -> Path:
  base = Path(os.environ.get("TINYSPEC_CACHE") or Path.home() / ".cache" / "tinyspec")
  d = base / sub if sub else base
  d.mkdir(parents=True, exist_ok=True)
  return d


def digest(*parts: str) -> str:
  h = hashlib.sha256()
  for p in parts:
    h.update(p.encode()); h.update(b"\0")
  return h.hexdigest()[:32]
