"""`tinyspec run --case DIR|ID --backend NAME`: judge one corpus case alone, as the runner does.

  tinyspec run --backend c --case conformance/cases/ADD/float32     # a case folder
  tinyspec run --backend mine --case ADD/float32                    # an id in --cases (default: the shipped corpus)

The case runs on the backend through the protocol (its own process), its outputs are
judged in the run's profile (--profile, else the project's [tool.tinyspec] profile, else the
one the backend claims), and a failure prints the differing elements, the operands there,
the profile and the first divergent node. Exit 0 pass, 1 fail or error, 2 bad usage, an
unreadable case or an unavailable backend, 5 not run (the backend's capabilities do not
cover the case). The manifest's verdict is said, not applied: a case it expects to fail
still exits 1, so a fix is seen as the pass it is.
"""
from __future__ import annotations
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.files import printable

FILE_OPTIONS = ("input", "out", "beam")   # what a FILE run takes and a case brings itself (or has no use for)


def add_options(p) -> None:
  """The options `tinyspec run` gains for judging a case."""
  p.add_argument("--case", metavar="DIR|ID", default=None,
                 help="judge one conformance case instead of running FILE: a case folder, or a case id in --cases; exit 0 "
                      "pass, 1 fail, 5 not run (the backend does not declare what the case needs)")
  p.add_argument("--cases", metavar="DIR", type=Path, default=None, help="with --case ID: the corpus (default: the shipped one)")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="with --case: judge by the canonical results (strict) or any allowed one (portable); default: the backend's")
  p.add_argument("--no-verify", dest="verify", action="store_false",
                 help="with --case: run it even when its files do not match their sha256 pin")


def _say(msg: str) -> None: print(printable(f"tinyspec run: {msg}"), file=sys.stderr)


def find_case(arg: str, cases_dir: Path | None):
  """The case a --case argument names: a folder holding case.json, else an id in the corpus.
  CaseError saying which when neither."""
  from tinyspec.conformance.corpus.cases import CASE_FILE, CASES_DIR, CaseError, load_cases, _case
  d = Path(arg)
  if (d / CASE_FILE).is_file(): return _case(d / CASE_FILE, d.parent)
  root = cases_dir or CASES_DIR
  if not root.is_dir(): raise CaseError(f"--cases {root}: no such directory")
  candidate = root / arg
  if (candidate / CASE_FILE).is_file():
    c = _case(candidate / CASE_FILE, root)
    if c.id == arg: return c
  found = [c for c in load_cases(root, []) if c.id == arg]
  if found: return found[0]
  from tinyspec.conformance.run.selection import did_you_mean
  ids = [c.id for c in load_cases(root, [])]
  where = "the shipped corpus" if cases_dir is None else str(root)
  raise CaseError(f"--case {arg!r}: neither a case folder nor a case id in {where}{did_you_mean(arg, ids)}")


def judge_case(a) -> int:
  from tinyspec.conformance.corpus.cases import CaseError
  from tinyspec.conformance.run.execute import CaseRunner, BackendUnavailable
  from tinyspec.conformance.corpus.manifest import ManifestError
  from tinyspec.conformance.run.settings import load_settings, SettingsError
  from tinyspec.conformance.run.runner import EXIT_NOTHING_RAN
  if a.file is not None: _say("give FILE or --case, not both"); return EXIT_UNREADABLE
  given = [f"--{o}" for o in FILE_OPTIONS if getattr(a, o, None)]
  if given: _say(f"{', '.join(given)}: for FILE runs (a case brings its own inputs)"); return EXIT_UNREADABLE
  try:
    settings = load_settings()
    case = find_case(a.case, a.cases or settings.cases)
  except (SettingsError, CaseError) as e:
    _say(str(e)); return EXIT_UNREADABLE
  timeout = float(a.time_limit) if a.time_limit else (settings.timeout or 60.0)
  try:
    r = CaseRunner(a.backend, timeout=timeout, verify=a.verify, profile=a.profile or settings.profile, divergence=1)
    r.capabilities()
    manifest = r.use_manifest(None, settings.manifests)
  except (KeyError, BackendUnavailable, ManifestError) as e:
    _say(str(e).strip('"')); return EXIT_UNREADABLE
  try: res = r.run_one(case)
  finally: r.close()
  said = [x for x in res.message.splitlines() if not x.strip().startswith("repro:")]   # this is the repro
  head = f"{res.status.upper()} {case.id} on {r.name} (profile {r.profile})"
  print(printable(head + (": " + "\n".join(said) if said else "")))
  expected, excluded = manifest.reason(case.id), manifest.excluded(case.id)
  if excluded: print(printable(f"note: {r.name}'s manifest excludes this case from runs: {excluded}"))
  if expected: print(printable(f"note: {r.name}'s manifest expects this case to fail: {expected}"))
  if res.status == "pass": return EXIT_OK
  if res.status == "unsupported": return EXIT_NOTHING_RAN
  return EXIT_INVALID
