"""The TINYSPEC_* environment variables and how their values are read.

A value a variable cannot mean (TINYSPEC_BEAM=1e9, TINYSPEC_THREADS=two, a device table
that does not exist) is refused with rule env.value (exit 2), never ignored or guessed
at: the command line checks every variable before it runs a command (`check_all`), and
the library reads each through `integer` / `choice`, which raise the same error.
README.md's Environment table says what each means (tests/core/test_environment.py holds it to VARIABLES).
"""
from __future__ import annotations
import os
import re
from tinyspec.files import control_character
from tinyspec.limits import parse_bytes
import yaml
from tinyspec import spec  # type: ignore[attr-defined]  # spec/ is installed as tinyspec.spec (setup.py maps the folder)

RULE = "env.value"

# every variable tinyspec reads (what each means: README.md's Environment table)
VARIABLES = ("TINYSPEC_CACHE", "TINYSPEC_EVAL_BUDGET", "TINYSPEC_OPENCL_DEVICE", "TINYSPEC_CFLAGS", "TINYSPEC_BEAM", "TINYSPEC_THREADS",
             "TINYSPEC_SLICE_ORDER", "TINYSPEC_TINYGRAD_DEVICE", "TINYSPEC_SCHEDULER")
MAX_BEAM = 2 ** 31
MAX_THREADS = 1024


class EnvironmentValue(ValueError):
  """A TINYSPEC_* variable holds a value it cannot mean (exit 2, rule env.value)."""
  exit_code = 2
  rule = RULE

  def __init__(self, name: str, value: str, wants: str):
    shown = value if len(value) <= 80 else value[:77] + "..."
    self.msg = f"{name}={shown!r}: {wants}"
    super().__init__(f"{self.msg} [{RULE}]")


def integer(name: str, default: int, low: int, high: int) -> int:
  """The variable as an integer in [low, high]; `default` when it is unset or empty."""
  raw = os.environ.get(name, "")
  text = raw.strip()
  if not text: return default
  if not (text.isdigit() or (text[0] in "+-" and text[1:].isdigit())) or len(text) > 20:
    raise EnvironmentValue(name, raw, f"expected an integer from {low} to {high}")
  v = int(text)
  if not low <= v <= high: raise EnvironmentValue(name, raw, f"expected an integer from {low} to {high}")
  return v


def choice(name: str, values: tuple, default: str = "") -> str:
  """The variable as one of `values`; `default` when it is unset or empty."""
  raw = os.environ.get(name, "")
  if not raw.strip(): return default
  if raw.strip() not in values: raise EnvironmentValue(name, raw, f"expected {' or '.join(repr(v) for v in values)} (or unset)")
  return raw.strip()


def table_key(name: str, rows: dict) -> str | None:
  """The key of `rows` (spec/render.yaml device_tables) that `name` names: its key or one
  of its `aliases`, in any case; None when none does."""
  want = name.strip().lower()
  return next((key for key, row in rows.items() if want == key.lower() or want in (a.lower() for a in row.get("aliases", ()))), None)


def device_table(name: str, rows: dict) -> str:
  """table_key of TINYSPEC_OPENCL_DEVICE=table:name, refused (env.value) when no row has it."""
  key = table_key(name, rows)
  if key is None:
    raise EnvironmentValue("TINYSPEC_OPENCL_DEVICE", f"table:{name}", f"no device table {name!r} (spec/render.yaml device_tables: "
                           f"{', '.join(sorted(rows))})")
  return key


SCHEDULER_RE = r"(?:(?:tcp|tls|inproc|ucx|ws|wss)://)?[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}"


def scheduler(name: str, raw: str) -> str:
  """A Dask scheduler's address (`tcp://HOST:PORT` or `HOST:PORT`), from `name` (a variable,
  an option or a setting): EnvironmentValue when it cannot be one."""
  text = raw.strip()
  if len(text) > 300 or not re.fullmatch(SCHEDULER_RE, text):
    raise EnvironmentValue(name, raw, "expected a Dask scheduler's address, tcp://HOST:PORT")
  return text


def check_all() -> None:
  """Read every variable tinyspec reads (raises EnvironmentValue): none may hold a NUL or
  another control character, and those whose values tinyspec interprets must mean one."""
  for name in VARIABLES:
    bad = control_character(os.environ.get(name, ""))
    if bad: raise EnvironmentValue(name, os.environ[name], f"holds the control character {bad}")
  budget = os.environ.get("TINYSPEC_EVAL_BUDGET", "")
  if budget:
    try: parse_bytes(budget)
    except ValueError as e: raise EnvironmentValue("TINYSPEC_EVAL_BUDGET", budget, str(e)) from None
  integer("TINYSPEC_BEAM", 0, 0, MAX_BEAM)
  integer("TINYSPEC_THREADS", 1, 1, MAX_THREADS)
  choice("TINYSPEC_SLICE_ORDER", ("reversed",))
  if os.environ.get("TINYSPEC_SCHEDULER", "").strip(): scheduler("TINYSPEC_SCHEDULER", os.environ["TINYSPEC_SCHEDULER"])
  dev = os.environ.get("TINYSPEC_OPENCL_DEVICE", "")
  if dev.startswith("table:"):
    with open(spec.path("render.yaml")) as f: rows = yaml.safe_load(f).get("device_tables", {})
    device_table(dev[len("table:"):], rows)
