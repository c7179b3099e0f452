"""Helpers of the adversarial suite (tests/*/test_hostile_*.py), in the spirit of the
WebAssembly spec tests' assert_malformed / assert_invalid: each hostile input is one line
saying what must happen to it.

  assert_malformed(tmp, data, rule)        the file cannot be read as a graph: exit 2 and the rule
  assert_invalid(tmp, nodes, rule)         a graph that breaks a rule: exit 1 and the rule
  assert_refused(argv, rule, code)         a command refuses: the exit code and the rule
  console(argv, ...)                       the real console script in a subprocess

Every call checks the common promise: no traceback, an exit code in {0, 1, 2}, the rule id
printed in brackets.
"""
from __future__ import annotations
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_backend.py"


def cli(*argv) -> tuple[int, str]:
  """tinyspec's main in this process: (exit code, stdout + stderr)."""
  import contextlib
  import io
  from tinyspec.cli import main
  buf = io.StringIO()
  with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
    try: rc = main([str(a) for a in argv])
    except SystemExit as e: rc = e.code
  text = buf.getvalue()
  assert "Traceback" not in text, text
  assert rc in (0, 1, 2), (rc, text)
  return rc, text


def console(*argv, env: dict | None = None, timeout: float = 120, cwd=None, **kw) -> subprocess.CompletedProcess:
  """The console script `tinyspec ARGV` in a subprocess (its own process: the time limit's
  watchdog is armed)."""
  e = dict(os.environ)
  e.update(env or {})
  r = subprocess.run([sys.executable, "-c", "import sys; from tinyspec.cli import main; sys.exit(main())", *map(str, argv)],
                     capture_output=True, text=True, timeout=timeout, env=e, cwd=cwd, **kw)
  assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
  return r


def assert_refused(argv, rule: str, code: int, *words) -> str:
  rc, text = cli(*argv)
  assert rc == code, (rc, text)
  assert f"[{rule}]" in text, text
  for w in words: assert w in text, text
  return text


def assert_malformed(tmp: Path, data: bytes, rule: str, *words, name: str = "g.json", cmd: str = "validate") -> str:
  f = tmp / name
  f.write_bytes(data)
  return assert_refused([cmd, f], rule, 2, *words)


def assert_invalid(tmp: Path, nodes, rule: str, *words, cmd: str = "validate", code: int = 1) -> str:
  f = tmp / "g.json"
  f.write_text(json.dumps(nodes))
  return assert_refused([cmd, f], rule, code, *words)


# ------------------------------------------------------------------ graphs
def buffer_nodes(shape, slot: int = 0, dtype: str = "float32", name: str | None = None) -> list:
  arg = {"slot": slot, "dtype": dtype, "device": "CPU", **({"name": name} if name is not None else {})}
  return [{"op": "VCONST", "arg": {"values": list(shape), "dtype": "index"}}, {"op": "BUFFER", "src": [0], "arg": arg}]


def neg_graph(shape=(2,), **kw) -> list:
  """NEG of one BUFFER: the smallest graph with an input."""
  return buffer_nodes(shape, **kw) + [{"op": "NEG", "src": [1]}]


def store_graph(name: str) -> list:
  """A BUFFER named `name` stored to: its contents are an output under that name."""
  return buffer_nodes((2,), name=name) + [{"op": "ADD", "src": [1, 1]}, {"op": "STORE", "src": [1, 2]}]


def kernel_nodes(special: str = "gidx0", bound: int = 16, slot=0) -> list:
  """A kernel: a SPECIAL index storing 0.0 into PARAM 0."""
  return [{"op": "CONST", "arg": {"value": bound, "dtype": "index"}}, {"op": "SPECIAL", "src": [0], "arg": {"name": special}},
          {"op": "VCONST", "arg": {"values": [bound], "dtype": "index"}}, {"op": "PARAM", "src": [2], "arg": {"slot": slot, "dtype": "float32"}},
          {"op": "INDEX", "src": [3, 1]}, {"op": "CONST", "arg": {"value": 0.0, "dtype": "float32"}}, {"op": "STORE", "src": [4, 5]},
          {"op": "SINK", "src": [6]}]


def write_json(path: Path, obj) -> Path:
  path.write_text(json.dumps(obj))
  return path


def files_under(d: Path) -> set:
  return {p.relative_to(d).as_posix() for p in d.rglob("*")}


# This process's own peak (VmHWM): ru_maxrss is carried over fork and exec on Linux, so a
# child of a big pytest worker would report the worker's peak.
_OWN_PEAK = ("def _own_peak_kib():\n"
             "  try: return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1])\n"
             "  except (OSError, StopIteration, ValueError): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n")


def peak_rss_mib(argv, env: dict | None = None, timeout: float = 300, limit_as: int | None = None) -> tuple[subprocess.CompletedProcess, float]:
  """Run `tinyspec ARGV` in a subprocess (optionally under RLIMIT_AS) and measure its peak RSS."""
  code = ("import resource, sys\n" + _OWN_PEAK
          + (f"resource.setrlimit(resource.RLIMIT_AS, ({limit_as}, {limit_as}))\n" if limit_as else "")
          + "from tinyspec.cli import main\nrc = main(sys.argv[1:])\nsys.stdout.flush()\n"
          "print('PEAK', _own_peak_kib(), file=sys.stderr)\nsys.exit(rc)\n")
  e = dict(os.environ); e.update(env or {})
  r = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, timeout=timeout, env=e)
  assert "Traceback" not in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-3000:]
  peak = [line for line in r.stderr.splitlines() if line.startswith("PEAK ")]
  return r, int(peak[-1].split()[1]) / 1024 if peak else float("nan")
