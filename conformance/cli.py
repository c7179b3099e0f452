"""`tinyspec conformance` and `tinyspec fuzz`.

  tinyspec conformance                                  # the rule corpus through tinyspec's validator
  tinyspec conformance --backend c [--cases DIR] [-k EXPR] [--case ID] [--junit FILE] [--json FILE]
                       [--workers N | --scheduler ADDRESS] [--timeout S] [--batch N] [--manifest FILE] [--progress]
                       [--coverage docs/conformance-results.json]
  tinyspec fuzz --backend c --examples N [--seed S] [--out DIR] [--jobs N | --scheduler ADDRESS] [--db PATH]
  tinyspec fuzz --backend c --sanitize --examples N [--seed S] [--out DIR] [--families F,...] [--jobs N]

Prints the failures (every case with -v; a message that repeats only once), a closing list
of the failing ids and the line `N passed, N failed, ...`. Exit 0 when there is no
unexpected result (no failure, error or unexpected pass), 1 when there is, 2 for bad usage,
an unknown or unavailable backend, or a corpus that cannot be read, 5 when no case ran
(none selected, or every one unsupported or excluded). The project's [tool.tinyspec]
(conformance/run/settings.py) gives defaults for --backend, --cases, --timeout, --profile and
the manifests.
"""
from __future__ import annotations
import argparse
import sys
from pathlib import Path
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.deadline import sigterm_raises, Terminated
from tinyspec.files import FileRefused, printable
from tinyspec.conformance.corpus.rulecases import RULES_DIR, EXPECT_SUFFIX, CorpusError
from tinyspec.conformance.fuzz.units import _address as address, add_options, interrupted
from tinyspec.conformance.run import runner
from tinyspec.conformance.run.failures import Terminal
from tinyspec.conformance.run.settings import load_settings, SettingsError
from tinyspec.conformance.run.selection import SelectionError
from tinyspec.conformance.cluster import ClusterUnreachable, scheduler_address
from tinyspec.conformance.findings import FindingsError
from tinyspec.conformance.fuzz import units
from tinyspec.conformance.run.runner import count
from tinyspec.graph import load_file
from tinyspec.validate import validate
from tinyspec.conformance.corpus.cases import from_disk, storage_dtype
from tinyspec.intervals import EXTENDED_FLOATS
from tinyspec.backends import get_backend


def _err(msg: str, code: int = EXIT_UNREADABLE) -> int:
  from tinyspec.conformance.runcmd import err  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  return err(msg, code)


def _is_rule_corpus(d: Path | None) -> bool:
  if d is None: return False
  d = Path(d)
  return d.resolve() == RULES_DIR.resolve() or (d.is_dir() and next(d.rglob("*" + EXPECT_SUFFIX), None) is not None
                                                 and next(d.rglob("case.json"), None) is None)


def _address(text: str) -> str:
  return address(text)


def conformance_command(sub):
  p = sub.add_parser("conformance", help="run the conformance suite",
                     description="Run the conformance cases through backends. Without --backend (and no backend in "
                                 "pyproject.toml [tool.tinyspec]): the rule corpus shipped with tinyspec through its validator. "
                                 "With --backend NAME (ref, c, opencl, any registered one, cmd:COMMAND or the path of an "
                                 "executable speaking the JSON-lines protocol of tinyspec.conformance.run.protocol): the case corpus shipped with "
                                 "tinyspec. Exit 0 when there is no unexpected result, 1 when there is, 2 for bad usage or an "
                                 "unreadable corpus, 5 when no case ran.")
  p.add_argument("--cases", metavar="DIR", type=Path, default=None, help="the case folder (default: the shipped case corpus, or the rule corpus for the validator)")
  p.add_argument("-k", dest="patterns", metavar="EXPR", action="append",
                 help="run only cases whose id matches EXPR, a pytest -k expression: terms are substrings of the id (ignoring "
                      "case; a term with * or ? is a glob over the whole id), joined by and, or, not and parentheses "
                      "('MAX or IDIV', 'ADD and not float'); repeat to narrow further")
  p.add_argument("--case", dest="case_ids", metavar="ID", action="append",
                 help="run exactly the case ID (repeatable; with -k, both must hold)")
  p.add_argument("--backend", dest="backends", metavar="NAME", action="append",
                 help=f"backend to run (repeatable; default: {', '.join(runner.DEFAULT_BACKENDS)})")
  p.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE")
  p.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML to FILE")
  p.add_argument("--html", metavar="DIR", help="also write a report to DIR/index.html: an op x dtype matrix by result, "
                                               "and per failure its graph, inputs, differing elements and repro command")
  p.add_argument("--workers", type=int, default=1, metavar="N",
                 help="without a scheduler: run the cases in shards on an embedded Dask cluster of N processes, each with its "
                      "own backend (default 1: here, no cluster); the results are the same whatever N is")
  p.add_argument("--scheduler", metavar="ADDRESS", type=_address, default=None,
                 help="run the shards on the Dask scheduler at ADDRESS (tcp://HOST:PORT; default $TINYSPEC_SCHEDULER, then "
                      "[tool.tinyspec] scheduler); its workers open the backend and read the corpus")
  p.add_argument("--timeout", type=float, default=None, metavar="S", help="seconds one case may take before it fails as a hang (default 60)")
  p.add_argument("--batch", type=int, default=None, metavar="N", help="merge up to N tensor-level cases into one run (default: the backend's own, 1 for external ones)")
  p.add_argument("--manifest", metavar="FILE", type=Path, help="expected failures and exclusions; `none` (or /dev/null): run without "
                                                                "one (default: the project's [tool.tinyspec.manifests] entry for the "
                                                                "backend, else the one the backend names in its hello, else the shipped "
                                                                "one for <backend> or <backend>-<variant>)")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="judge by the canonical results (strict) or any allowed one (portable); default: the profile the backend claims")
  p.add_argument("--coverage", metavar="FILE", type=Path, help="merge the op x dtype coverage into FILE (e.g. docs/conformance-results.json)")
  p.add_argument("--divergence", type=int, default=20, metavar="N",
                 help="search the first divergent node of up to N failing cases (by running the graph cut at its nodes; "
                      "about log2(nodes) runs each, at most 16 or 30 s); 0: none (default 20)")
  p.add_argument("--progress", action="store_true", help="report progress on stderr even when it is not a terminal")
  p.add_argument("-v", "--verbose", action="store_true", help="print every case, not only failures")
  p.add_argument("--list", action="store_true", help="list the selected cases and exit")
  p.add_argument("--no-verify", dest="verify", action="store_false",
                 help="run cases whose files do not match their sha256 pin (default: such a case is an error, rule case.pin)")

  def run(a) -> int:
    try: a.settings = load_settings()
    except SettingsError as e: return _err(str(e))
    _defaults(a, a.settings)
    a.terminal = Terminal(a.verbose, lambda line: print(line, flush=True))   # messages come from files and backends: escaped
    show = lambda a, r: a.terminal.show(r)
    names = a.backends or list(runner.DEFAULT_BACKENDS)
    judges = [n for n in names if n in runner.BACKENDS]
    execs = [n for n in names if n not in runner.BACKENDS]
    if judges and execs: return _err("judges of the rule corpus (validator) and executing backends run separately")
    if judges or (not execs and _is_rule_corpus(a.cases)):
      return _run_judges(a, judges or list(runner.DEFAULT_BACKENDS), show)
    from tinyspec.conformance.runcmd import run_execs  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
    return run_execs(a, execs, show)
  return p, run


def _defaults(a, settings) -> None:
  """What the command line leaves out, from [tool.tinyspec] (said on stderr where it
  picks the backend), else the built-in defaults."""
  a.project = None   # the folder of the pyproject.toml that names the backend
  if not a.backends and settings.backend:
    a.backends, a.project = [settings.backend], settings.folder
    print(printable(f"tinyspec conformance: backend {settings.backend} (from {settings.where()})"), file=sys.stderr)
  if a.cases is None and settings.cases is not None: a.cases = settings.cases
  if a.timeout is None: a.timeout = settings.timeout or 60.0
  if a.profile is None: a.profile = settings.profile


def _run_judges(a, names, show) -> int:
  from tinyspec.conformance.runcmd import none_selected, finish  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  try:
    cases = runner.select(runner.load_cases(a.cases), a.patterns, a.case_ids)
  except (CorpusError, SelectionError) as e:
    return _err(str(e))
  if not cases:
    return none_selected(a)
  if a.list:
    for c in cases: print(printable(c.id))
    return EXIT_OK
  backends = [runner.BACKENDS[n]() for n in names]
  results = runner.run(cases, backends, lambda r: show(a, r))
  return finish(a, results, names, str(a.cases or "conformance/rules"))


def _jobs(text: str) -> int:
  try: n = int(text)
  except ValueError: n = 0
  if n < 1: raise argparse.ArgumentTypeError(f"--jobs takes a positive number of processes, not {text!r}")
  return n


def _run_sanitized(a) -> int:
  from tinyspec.conformance.fuzz import sanitize, hostile  # noqa: PLC0415 (hypothesis, a test extra: only tinyspec fuzz needs it)
  from tinyspec.compiler.device import usable_cpus  # noqa: PLC0415 (start-up time: tinyspec conformance does not load the compiler)
  if a.backend != "c":
    print("tinyspec fuzz: --sanitize builds C kernels: use --backend c", file=sys.stderr); return EXIT_UNREADABLE
  families = a.families.split(",") if a.families else list(hostile.FAMILIES)
  bad = [f for f in families if f not in hostile.FAMILIES]
  if bad:
    print(f"tinyspec fuzz: unknown families {', '.join(bad)} (known: {', '.join(hostile.FAMILIES)})", file=sys.stderr); return EXIT_UNREADABLE
  try: address, db = units.resolve(a, "tinyspec fuzz")
  except (SettingsError, FileRefused) as e:
    print(printable(f"tinyspec fuzz: {e}"), file=sys.stderr); return EXIT_UNREADABLE
  why = sanitize.unavailable()
  if why and address is None:   # (on a cluster the workers' own runtimes count: a worker without them runs no unit)
    print(f"tinyspec fuzz: {why}", file=sys.stderr); return EXIT_UNREADABLE
  try:
    with sigterm_raises():
      rep = sanitize.fuzz_sanitized(a.examples, a.seed, a.out, families, log=lambda m: print(m, flush=True), timeout=a.timeout,
                                    jobs=a.jobs or usable_cpus(), scheduler=address, db=db, progress=a.progress or None)
  except (ClusterUnreachable, FindingsError) as e:
    print(printable(f"tinyspec fuzz: {e}" + ("" if f"[{e.rule}]" in str(e) else f" [{e.rule}]")), file=sys.stderr); return EXIT_UNREADABLE
  except (KeyboardInterrupt, Terminated) as e:
    sanitize.stop_runners()
    return units.interrupted("tinyspec fuzz", e, db)
  for w in rep.written: print(f"wrote {w}")
  why = rep.refused.pop("why", {})
  if rep.refused:
    print("refused (documented limitations, not failures): " + ", ".join(f"{k} {v}" for k, v in sorted(rep.refused.items())))
    for k, v in sorted(why.items()): print(f"  {k}, e.g.: {v}")
  print("examples per family: " + ", ".join(f"{k} {v}" for k, v in sorted(rep.drawn.items())))
  print(f"{count(rep.examples, 'example')}, {count(len(rep.failures), 'failure')}, {rep.seconds:.1f} s (backend c, sanitized: ASan+UBSan, TSan; seed {a.seed})")
  lost = units.said("tinyspec fuzz", rep, db, len(sanitize.plan(a.examples, a.seed, families)))
  if lost is not None: return lost
  if rep.missing: return EXIT_UNREADABLE
  return EXIT_OK if not rep.failures else EXIT_INVALID


def run_command(sub):
  """`tinyspec run` (compiler/cli.py) with every backend: the ones it does not run itself
  go through the protocol in their own process; without --backend the project's; `--case`
  judges a conformance case, `--compare ref` a graph against the reference
  (conformance/run/repro.py)."""
  from tinyspec.compiler.cli import run_command as base  # noqa: PLC0415 (start-up time: tinyspec conformance does not load the compiler)
  from tinyspec.conformance.run import repro  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  p, run = base(sub, run_other=_run_other)
  repro.add_options(p)
  return p, lambda a: repro.run_or_judge(a, run)


def _run_other(a, inputs: dict) -> dict | int:
  """Outputs of the graph file on a.backend, or the exit code after saying why not."""
  from tinyspec.conformance.run.client import run_graph  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  from tinyspec.conformance.run.execute import BackendUnavailable  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  try: return _bfloat16_viewed(a.file, run_graph(a.backend, a.file, inputs, float(a.time_limit) if a.time_limit else 60.0, getattr(a, "project", None)))
  except (KeyError, BackendUnavailable) as e:
    print(printable(f"tinyspec run: {str(e).strip(chr(34))}"), file=sys.stderr); return EXIT_UNREADABLE
  except (RuntimeError, ValueError) as e:
    rule = getattr(e, "rule", None)
    print(printable(f"{a.file}: {e}" + (f" [{rule}]" if rule and f"[{rule}]" not in str(e) else "")), file=sys.stderr)
    return EXIT_INVALID


def _bfloat16_viewed(graph_file, outputs: dict) -> dict:
  """The outputs of a backend (the protocol carries bfloat16 as its uint16 bit patterns)
  with a bfloat16 root's viewed as bfloat16 again, as ref, c and opencl give theirs."""
  g, _ = load_file(graph_file)
  if g is None: return outputs
  views = validate(g).views
  dts = {f"out{k}": getattr(views[r], "dtype", None) for k, r in enumerate(g.root_indices) if r < len(views)}
  return {k: from_disk(v, dts[k]) if dts.get(k) in EXTENDED_FLOATS and v.dtype == storage_dtype(dts[k]) else v for k, v in outputs.items()}


def _run_campaign(a) -> int:
  """--campaign: the backend's own hunt (tinygrad: interop/campaign.py); exit 1 when it found a new bug."""
  try: b = get_backend(a.backend)
  except KeyError as e:
    print(printable(f"tinyspec fuzz: {str(e).strip(chr(34))}"), file=sys.stderr); return EXIT_UNREADABLE
  if not callable(getattr(b, "campaign", None)):
    print(f"tinyspec fuzz: --campaign: backend {a.backend} has no campaign", file=sys.stderr); return EXIT_UNREADABLE
  if not a.campaign > 0: print("tinyspec fuzz: --campaign needs a positive number of minutes", file=sys.stderr); return EXIT_UNREADABLE
  devices = [d for d in (a.devices or "").split(",") if d] or None
  from tinyspec.compiler.device import usable_cpus  # noqa: PLC0415 (start-up time: tinyspec conformance does not load the compiler)
  try: address, db = units.resolve(a, "tinyspec fuzz")
  except (SettingsError, FileRefused) as e:
    print(printable(f"tinyspec fuzz: {e}"), file=sys.stderr); return EXIT_UNREADABLE
  try:
    with sigterm_raises():
      rep = b.campaign(a.campaign, devices, a.out, a.seed, log=lambda m: print(printable(m), flush=True), examples=a.examples,
                       scheduler=address, jobs=a.jobs or usable_cpus(), db=db, progress=a.progress or None)
  except (ValueError, ClusterUnreachable, FindingsError) as e:
    rule = getattr(e, "rule", None)
    print(printable(f"tinyspec fuzz: {e}" + (f" [{rule}]" if rule and f"[{rule}]" not in str(e) else "")), file=sys.stderr)
    return EXIT_UNREADABLE
  except (KeyboardInterrupt, Terminated) as e:
    return units.interrupted("tinyspec fuzz", e, db)
  lost = units.said("tinyspec fuzz", rep, db, 0)
  if lost is not None: return lost
  return EXIT_INVALID if rep.new else EXIT_OK


def fuzz_command(sub):
  p = sub.add_parser("fuzz", help="property-based differential testing of a backend",
                     description="Draw valid graphs from the tables (conformance/fuzz/graphs.py) and check the backend's value "
                                 "of every node against the reference evaluator, the validator, the derived min_max and (for the "
                                 "compiler) every stage graph (conformance/fuzz/checks.py). Each failure is shrunk to a minimal "
                                 "graph and written as a corpus case under --out. Exit 0 when nothing failed, 1 when something "
                                 "did, 2 for bad usage or an unavailable backend.")
  p.add_argument("--backend", required=True, metavar="NAME", help="a registered backend, cmd:COMMAND, or an executable speaking the protocol")
  p.add_argument("--examples", type=int, default=None, metavar="N",
                 help="graphs to draw (default 100); with --campaign: graphs per device, then the campaign ends (default: "
                      "until its minutes are spent)")
  p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0): the same seed draws the same graphs")
  p.add_argument("--out", type=Path, default=Path("fuzz-cases"), metavar="DIR", help="where the minimal failing cases go (default ./fuzz-cases)")
  p.add_argument("--level", choices=["tensor", "kernel", "both"], default="both", help="the level of the graphs drawn (default both)")
  p.add_argument("--max-ops", type=int, default=6, metavar="K", help="op nodes per graph at most (default 6)")
  p.add_argument("--no-stages", action="store_true", help="do not check the compiler's stage graphs")
  p.add_argument("--profile", choices=["strict", "portable"], default=None,
                 help="judge values by the canonical results (strict) or any allowed one (portable); default: the backend's")
  p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds one run may take before it counts as a hang (default 60)")
  p.add_argument("--sanitize", action="store_true",
                 help="c only: hostile graphs (conformance/fuzz/hostile.py) through kernels built with AddressSanitizer, "
                      "UndefinedBehaviorSanitizer and, where threads run, ThreadSanitizer (conformance/fuzz/sanitize.py)")
  p.add_argument("--families", metavar="F,...", default=None,
                 help="with --sanitize: the example families to draw (default all of conformance/fuzz/hostile.py FAMILIES)")
  p.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                 help="without --scheduler: an embedded Dask cluster of N worker processes (default: the CPUs this process may "
                      "use with --sanitize or --campaign; 1 for the graph fuzz: in this process, no cluster); the same --seed "
                      "draws the same examples whatever N is")
  p.add_argument("--campaign", type=float, default=None, metavar="MINUTES",
                 help="hunt for MINUTES on each of --devices (a backend that has a campaign: tinygrad) and print each "
                      "distinct new bug once, with its repro")
  p.add_argument("--devices", metavar="D,...", default=None, help="with --campaign: the backend's devices (tinygrad: PYTHON,CPU,CL)")
  add_options(p, "an embedded cluster of --jobs processes")

  def run(a) -> int:
    if (a.examples is not None and a.examples < 1) or a.max_ops < 1:
      print("tinyspec fuzz: --examples and --max-ops must be at least 1", file=sys.stderr); return EXIT_UNREADABLE
    if a.campaign is not None and not a.sanitize: return _run_campaign(a)
    a.examples = 100 if a.examples is None else a.examples
    if a.sanitize: return _run_sanitized(a)
    if not a.timeout > 0: print("tinyspec fuzz: --timeout must be a positive number of seconds", file=sys.stderr); return EXIT_UNREADABLE
    return _run_graph_fuzz(a)
  return p, run


def _run_graph_fuzz(a) -> int:
  """The graph fuzz (conformance/fuzz/graphunits.py): here, on --jobs processes, or on a scheduler."""
  from tinyspec.conformance.fuzz import graphunits  # noqa: PLC0415 (hypothesis, a test extra: only tinyspec fuzz needs it)
  from tinyspec.conformance.fuzz.driver import NoDrawableOps  # noqa: PLC0415 (hypothesis, a test extra: only tinyspec fuzz needs it)
  from tinyspec.refimpl import EvalError  # noqa: PLC0415 (start-up time: tinyspec conformance does not load the reference)
  from tinyspec.conformance.run.execute import BackendUnavailable  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  from tinyspec.conformance.run.onworker import forwarded  # noqa: PLC0415 (start-up time: the runner loads when a command runs it)
  try: address, where = scheduler_address(a.scheduler, load_settings())
  except SettingsError as e: print(printable(f"tinyspec fuzz: {e}"), file=sys.stderr); return EXIT_UNREADABLE
  if address is not None and where != "--scheduler": print(f"tinyspec fuzz: on the Dask scheduler at {address} (from {where})", file=sys.stderr)
  job = graphunits.GraphJob(a.backend, a.seed, ("tensor", "kernel") if a.level == "both" else (a.level,), not a.no_stages,
                            a.max_ops, a.timeout, a.profile, forwarded())
  try:
    with sigterm_raises():
      rep = graphunits.fuzz_units(job, a.examples, a.out, lambda m: print(printable(m), flush=True), address, a.jobs or 1,
                                  a.db, a.progress or None)
  except (KeyError, BackendUnavailable, NoDrawableOps, ClusterUnreachable, FindingsError) as e:
    rule = getattr(e, "rule", None)
    print(printable(f"tinyspec fuzz: {str(e).strip(chr(34))}" + (f" [{rule}]" if rule and f"[{rule}]" not in str(e) else "")), file=sys.stderr)
    return EXIT_UNREADABLE
  except EvalError as e:   # the oracle itself cannot run (a memory budget too small for any graph)
    print(printable(f"tinyspec fuzz: the reference evaluator cannot check the examples: {e}"), file=sys.stderr)
    return EXIT_INVALID
  except (KeyboardInterrupt, Terminated) as e:
    return interrupted("tinyspec fuzz", e, a.db)
  return _graph_fuzz_said(a, rep)


def _graph_fuzz_said(a, rep) -> int:
  """The graph fuzz's closing lines and exit code."""
  from tinyspec.conformance.fuzz import graphunits  # noqa: PLC0415 (hypothesis, a test extra: only tinyspec fuzz needs it)
  for w in rep.written: print(f"wrote {w}")
  if rep.unwritten:   # the failures were found (and printed) but cannot be kept
    print(f"tinyspec fuzz: {rep.unwritten[0]}" + (f" (and {len(rep.unwritten) - 1} more)" if len(rep.unwritten) > 1 else ""), file=sys.stderr)
  if rep.refused:
    print("refused (documented limitations, not failures): " + ", ".join(f"{k} {v}" for k, v in sorted(rep.refused.items())))
  if rep.unsupported:
    print("unsupported by the backend's adapter (not failures): " + "; ".join(f"{k} x{v}" for k, v in sorted(rep.unsupported.items())))
  if rep.known:
    print("documented bugs (not failures): " + ", ".join(sorted({getattr(f.triage, "bug", None) or str(f) for f in rep.known})))
  print(f"{count(rep.examples, 'example')}, {count(len(rep.failures), 'failure')}, {rep.seconds:.1f} s (backend {rep.backend}, seed {a.seed}, profile {rep.profile})")
  lost = units.said("tinyspec fuzz", rep, a.db, len(graphunits.plan(a.examples, "")))
  if lost is not None: return lost
  return EXIT_UNREADABLE if rep.unwritten or rep.missing else EXIT_OK if not rep.failures else EXIT_INVALID
