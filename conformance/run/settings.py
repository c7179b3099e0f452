"""A project's conformance settings: the `[tool.tinyspec]` table of its pyproject.toml.

    [tool.tinyspec]
    backend = "cmd:node backend/main.js"    # what `tinyspec conformance`, `tinyspec run` and the pytest plugin run
    cases = "tests/cases"                   # a case corpus of the project's own (default: the shipped one)
    timeout = 30                            # seconds per case
    profile = "portable"                    # strict or portable (default: the one the backend claims)
    scheduler = "tcp://10.0.0.5:8786"       # the Dask scheduler tinyspec fuzz and conformance run on
    [tool.tinyspec.manifests]
    mine = "tests/mine-manifest.yaml"       # expected failures / exclusions of the backend named `mine`

The file is the nearest pyproject.toml holding a `[tool.tinyspec]` table, looking from the
current directory up (as ruff and black look for theirs). Paths are relative to that file's
folder, the backend's command too (`cmd:./backend`, `cmd:python backend.py`: it runs in that
folder). A command-line option wins over the file. An unknown key is refused with the
nearest known one named (rule file.schema), so a misspelt key never silently does nothing.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from pathlib import Path
import tomllib
from tinyspec.files import read_text, FileRefused, control_character, printable
from tinyspec.limits import limits
from tinyspec.conformance.run.selection import did_you_mean
from tinyspec.environment import scheduler, EnvironmentValue

KEYS = {"backend": str, "cases": str, "timeout": (int, float), "profile": str, "manifests": dict, "scheduler": str}
PROFILES = ("strict", "portable")


class SettingsError(ValueError):
  """A [tool.tinyspec] table that cannot be used (its message names the file and key)."""


@dataclass
class Settings:
  path: Path | None = None          # the pyproject.toml read, None when there is none
  backend: str | None = None
  cases: Path | None = None
  timeout: float | None = None
  profile: str | None = None
  manifests: dict = field(default_factory=dict)   # backend name -> Path
  scheduler: str | None = None      # a Dask scheduler's address (conformance/cluster.py)

  def where(self) -> str: return f"[tool.tinyspec] of {self.path}"

  @property
  def folder(self) -> Path | None:
    """The folder of the pyproject.toml: what its relative paths (the backend's too) start from."""
    return self.path.parent if self.path is not None else None


def find_pyproject(start: Path | str | None = None) -> Path | None:
  """The nearest pyproject.toml from `start` (default: the current directory) up that has
  a [tool.tinyspec] table."""
  d = Path(start or Path.cwd()).resolve()
  for folder in (d, *d.parents):
    p = folder / "pyproject.toml"
    try:
      if p.is_file() and "tinyspec" in p.read_text(errors="replace") and "tinyspec" in _read(p).get("tool", {}): return p
    except SettingsError: return p   # the nearest one that mentions us: its error is the user's to see
    except OSError: continue
  return None


def _read(p: Path) -> dict:
  try: return tomllib.loads(read_text(p, limits().max_small_file, "pyproject.toml"))
  except FileRefused as e: raise SettingsError(str(e)) from None
  except tomllib.TOMLDecodeError as e: raise SettingsError(f"{p}: cannot be read: {e} [file.parse]") from None


def load_settings(start: Path | str | None = None) -> Settings:
  """The settings of the project around `start`; empty Settings when there are none.
  SettingsError for a table that is malformed."""
  p = find_pyproject(start)
  if p is None: return Settings()
  t = _read(p).get("tool", {}).get("tinyspec")
  if not isinstance(t, dict): raise SettingsError(f"{p}: [tool.tinyspec] must be a table [file.schema]")
  for k, v in t.items():
    if k not in KEYS:
      raise SettingsError(f"{p}: [tool.tinyspec] has an unknown key {k!r}{did_you_mean(k, KEYS)} (known: {', '.join(KEYS)}) [file.schema]")
    if not isinstance(v, KEYS[k]) or isinstance(v, bool):
      raise SettingsError(f"{p}: [tool.tinyspec] {k} must be a {_kind(KEYS[k])} [file.schema]")
  _no_control(p, t)
  base = p.parent
  if t.get("profile") is not None and t["profile"] not in PROFILES:
    raise SettingsError(f"{p}: [tool.tinyspec] profile must be strict or portable [file.schema]")
  if "timeout" in t and not t["timeout"] > 0: raise SettingsError(f"{p}: [tool.tinyspec] timeout must be a positive number of seconds [file.schema]")
  mans = t.get("manifests", {})
  if not all(isinstance(v, str) for v in mans.values()):
    raise SettingsError(f"{p}: [tool.tinyspec.manifests] maps backend names to manifest files [file.schema]")
  if "scheduler" in t:
    try: scheduler("scheduler", t["scheduler"])
    except EnvironmentValue as e: raise SettingsError(f"{p}: [tool.tinyspec] {e.msg} [file.schema]") from None
  return Settings(p, t.get("backend"), base / t["cases"] if "cases" in t else None,
                  float(t["timeout"]) if "timeout" in t else None, t.get("profile"), {k: base / v for k, v in mans.items()},
                  t.get("scheduler"))


def _no_control(p: Path, t: dict) -> None:
  """No text of the table (a value, a manifest's backend name or file) holds a NUL or
  another control character (tinyspec.files.control_character): SettingsError."""
  texts = [(k, v) for k, v in t.items() if isinstance(v, str)]
  texts += [(f"manifests.{m}", x) for m, v in t.get("manifests", {}).items() for x in (m, v) if isinstance(x, str)]
  for key, text in texts:
    bad = control_character(text)
    if bad: raise SettingsError(f"{p}: [tool.tinyspec] {printable(key)[:80]} holds the control character {bad} [setting.value]")


def _kind(t) -> str:
  return {str: "string", dict: "table"}.get(t, "number")
