"""`tinyspec backends`: every backend and what it needs on this machine, what a user runs
first when something fails. Each backend says it itself (Backend.describe: the C compiler,
each OpenCL device and whether it builds, Oclgrind, tinygrad and its device); the C
sanitizer runtimes that `fuzz --sanitize` needs are added here. Exit 0 always; --json
prints one JSON document."""
from __future__ import annotations
import json
from tinyspec.diagnostics import EXIT_OK
from tinyspec.files import printable
from tinyspec.backends import backend_names, get_backend, describe_by_capabilities


def survey() -> list[dict]:
  """{"backend", "status", "why", "details"} per registered backend, in name order."""
  rows = []
  for name in backend_names():
    try:
      b = get_backend(name)
      d = b.describe() if callable(getattr(b, "describe", None)) else describe_by_capabilities(b)
    except Exception as e:    # a broken third-party backend is reported, not raised
      d = {"status": "unavailable", "why": f"{type(e).__name__}: {e}", "details": []}
    if name == "c":
      why = _sanitizer_unavailable()
      d.setdefault("details", []).append("sanitizer runtimes (fuzz --sanitize): " + ("found" if why is None else why))
    rows.append({"backend": name, "status": d.get("status", "?"), "why": d.get("why"), "details": list(d.get("details") or [])})
  return rows


def _sanitizer_unavailable() -> str | None:
  """Why `fuzz --sanitize` cannot run here (None: it can); the sanitizer fuzzer needs
  hypothesis, which an install without the test extra lacks."""
  try:
    from tinyspec.conformance.fuzz.sanitize import unavailable  # noqa: PLC0415 (needs hypothesis, a test extra)
  except ImportError as e:
    return f"the fuzzer needs the test extra ({e.name or e}): pip install 'tinyspec[test]'"
  return unavailable()


def backends_command(sub):
  p = sub.add_parser("backends", help="list the backends and what each needs on this machine",
                     description="List every registered backend and what it needs here: the C compiler and its sanitizer "
                                 "runtimes, each OpenCL platform and device and whether it builds a kernel, Oclgrind, tinygrad "
                                 "and its device, third-party backends. Exit 0 always.")
  p.add_argument("--json", action="store_true", help="print one JSON document")

  def run(a) -> int:
    rows = survey()
    if a.json:
      print(json.dumps({"backends": rows}, indent=1))
      return EXIT_OK
    for r in rows:
      print(printable(f"{r['backend']:10s} {r['status']}" + (f": {r['why']}" if r["why"] else "")))
      for line in r["details"]: print(printable(f"{'':10s}   {line}"))
    return EXIT_OK
  return p, run
