"""`tinyspec run`'s conformance side: the project's backend, a graph compared with the
reference, and one corpus case judged alone, as the runner does.

  tinyspec run --backend c --case conformance/cases/ADD/float32     # a case folder
  tinyspec run --backend mine --case ADD/float32 [--out DIR]        # an id in --cases (default: the shipped corpus)
  tinyspec run graph.json --backend mine --input buf0=x.npy --compare ref   # FILE judged against the reference

Without --backend, `run` takes the backend the project's pyproject.toml [tool.tinyspec]
names (said on stderr), else ref. A case runs on the backend through the protocol (its
own process), its outputs are judged in the run's profile (--profile, else the project's
[tool.tinyspec] profile, else the one the backend claims), and a failure prints the
differing elements, the operands there, the profile and the first divergent node; --out
writes the outputs the backend gave. --compare ref makes FILE and its inputs a case
(expected outputs and bounds from the reference and the tables) and judges it the same
way. Exit 0 pass, 1 fail or error, 2 bad usage, an unreadable case or an unavailable
backend, 5 not run (the backend's capabilities do not cover the case). The manifest's
verdict is said, not applied: a case it expects to fail still exits 1, so a fix is seen as
the pass it is.
"""
from __future__ import annotations
import sys
from pathlib import Path
import shutil
import tempfile
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.files import printable, FileRefused, make_dir, save_npy
from tinyspec.conformance.run.settings import load_settings, SettingsError
from tinyspec.conformance.corpus.cases import CASE_FILE, CASES_DIR, CaseError, load_cases, _case
from tinyspec.conformance.run.selection import did_you_mean
from tinyspec.conformance.run.runner import EXIT_NOTHING_RAN

FILE_OPTIONS = ("input", "beam")   # what a FILE run takes and a case brings itself (or has no use for)


def add_options(p) -> None:
  """The options `tinyspec run` gains for judging a case."""
  p.add_argument("--case", metavar="DIR|ID", default=None,
                 help="judge one conformance case instead of running FILE: a case folder, or a case id in --cases; exit 0 "
                      "pass, 1 fail, 5 not run (the backend does not declare what the case needs)")
  p.add_argument("--cases", metavar="DIR", type=Path, default=None, help="with --case ID: the corpus (default: the shipped one)")
  p.add_argument("--compare", choices=["ref"], default=None,
                 help="with FILE: judge the backend's outputs against the reference evaluator's, as a conformance case "
                      "(bit-exact, or within the tables' ulp bounds for inexact ops); exit 0 they agree, 1 they differ")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="with --case or --compare: judge by the canonical results (strict) or any allowed one (portable); "
                      "default: the backend's")
  p.add_argument("--no-verify", dest="verify", action="store_false",
                 help="with --case: run it even when its files do not match their sha256 pin")


def run_or_judge(a, run_file) -> int:
  """`tinyspec run`: the backend (--backend, else the project's, else ref), then a case
  judged (--case), FILE compared (--compare) or FILE run (`run_file`)."""
  try: a.settings = load_settings()
  except SettingsError as e:
    _say(str(e)); return EXIT_UNREADABLE
  a.project = None   # the folder of the pyproject.toml that names the backend
  if a.backend is None and a.settings.backend:
    a.backend, a.project = a.settings.backend, a.settings.folder
    _say(f"backend {a.backend} (from {a.settings.where()})")
  a.backend = a.backend or "ref"
  if a.case is not None: return judge_case(a)
  if a.compare is not None: return compare_file(a)
  return run_file(a)


def _say(msg: str) -> None: print(printable(f"tinyspec run: {msg}"), file=sys.stderr)


def find_case(arg: str, cases_dir: Path | None):
  """The case a --case argument names: a folder holding case.json, else an id in the corpus.
  CaseError saying which when neither."""
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
  ids = [c.id for c in load_cases(root, [])]
  where = "the shipped corpus" if cases_dir is None else str(root)
  raise CaseError(f"--case {arg!r}: neither a case folder nor a case id in {where}{did_you_mean(arg, ids)}")


def judge_case(a) -> int:
  if a.file is not None: _say("give FILE or --case, not both"); return EXIT_UNREADABLE
  given = [f"--{o}" for o in FILE_OPTIONS if getattr(a, o, None)] + (["--compare"] if a.compare else [])
  if given: _say(f"{', '.join(given)}: for FILE runs (a case brings its own inputs)"); return EXIT_UNREADABLE
  try: case = find_case(a.case, a.cases or a.settings.cases)
  except CaseError as e:
    _say(str(e)); return EXIT_UNREADABLE
  return _judge(a, case, case.id)


def compare_file(a) -> int:
  """FILE and its --input arrays made a case in a temporary folder (the reference's outputs,
  the tables' bounds) and judged on the backend as judge_case judges a corpus case."""
  from tinyspec.compiler.cli import parse_inputs  # noqa: PLC0415 (start-up time: interop/compositions.py imports this module without the compiler)
  from tinyspec.conformance.corpus.newcase import write_graph_case, CaseMakingError  # noqa: PLC0415 (start-up time: only --compare makes a case)
  if a.file is None: _say("--compare judges a graph FILE"); return EXIT_UNREADABLE
  if a.beam is not None or a.cast:
    _say("--beam, --cast: not with --compare (give each input in its buffer's dtype)"); return EXIT_UNREADABLE
  try: inputs = parse_inputs(a.input)
  except (FileRefused, ValueError) as e:
    _say(str(e)); return EXIT_UNREADABLE
  tmp = Path(tempfile.mkdtemp(prefix="tinyspec-compare-"))
  try:
    folder = tmp / "case"
    try:
      write_graph_case(folder, a.file, inputs, fill=False, description=f"{a.file} against the reference", tool="tinyspec run --compare")
      case = _case(folder / CASE_FILE, tmp)
    except (CaseMakingError, CaseError) as e:
      _say(str(e)); return getattr(e, "exit_code", EXIT_UNREADABLE)
    return _judge(a, case, str(a.file))
  finally: shutil.rmtree(tmp, ignore_errors=True)


def _judge(a, case, shown: str) -> int:
  """Run `case` alone on a.backend, print its verdict (as `shown`) and what the manifest
  says of it, write its outputs under --out; the exit code."""
  from tinyspec.conformance.run.execute import CaseRunner, BackendUnavailable  # noqa: PLC0415 (start-up time: tinyspec run FILE does not load the case runner)
  from tinyspec.conformance.corpus.manifest import ManifestError  # noqa: PLC0415 (start-up time: tinyspec run FILE does not load the case runner)
  timeout = float(a.time_limit) if a.time_limit else (a.settings.timeout or 60.0)
  try:
    r = CaseRunner(a.backend, timeout=timeout, verify=a.verify, profile=a.profile or a.settings.profile, divergence=1,
                   project=a.project)
    r.capabilities()
    manifest = r.use_manifest(None, a.settings.manifests)
  except (KeyError, BackendUnavailable, ManifestError) as e:
    _say(str(e).strip('"')); return EXIT_UNREADABLE
  outputs: dict = {}
  try: res = r.run_one(case, outputs)
  finally: r.close()
  said = [x for x in res.message.splitlines() if not x.strip().startswith("repro:")]   # this is the repro
  head = f"{res.status.upper()} {shown} on {r.name} (profile {r.profile})"
  print(printable(head + (": " + "\n".join(said) if said else "")))
  expected, excluded = manifest.reason(case.id), manifest.excluded(case.id)
  if excluded: print(printable(f"note: {r.name}'s manifest excludes this case from runs: {excluded}"))
  if expected: print(printable(f"note: {r.name}'s manifest expects this case to fail: {expected}"))
  if a.out and outputs:
    code = _write_outputs(a.out, outputs)
    if code: return code
  if res.status == "pass": return EXIT_OK
  if res.status == "unsupported": return EXIT_NOTHING_RAN
  return EXIT_INVALID


def _write_outputs(out: str, outputs: dict) -> int:
  """The backend's outputs as OUT/NAME.npy (bfloat16 as its uint16 bit patterns, as the
  corpus stores it); 0, or the exit code after saying why not."""
  try:
    d = make_dir(out)
    for k, v in outputs.items(): print(printable(f"wrote {save_npy(d, k, v)}"))
  except FileRefused as e:
    _say(str(e)); return e.exit_code
  return 0
