"""The Hypothesis-driven fuzz of the command line (tests/support/cli_fuzz.py) over mutated graph
files, .npy headers, case folders and protocol lines: no traceback, an exit code in
{0, 1, 2}, bounded time, no file written outside the directory given, and a peak RSS
under 1 GiB (the memory budget set to 256 MiB: the budget is what bounds memory).

CI runs a slice of 10,000 inputs; TINYSPEC_CLI_FUZZ=N runs N (e.g. 100000), with
TINYSPEC_CLI_FUZZ_SEED=S for other draws. The driver runs the inputs in its own process,
through tinyspec.cli.main; a command that hangs in native code is ended by the CLI's own
watchdog (exit 1, [run.timeout]: time stays bounded) and the driver is started again
after that input."""
from __future__ import annotations
import json
import os
import subprocess
import sys
import time
from pathlib import Path

COUNT = int(os.environ.get("TINYSPEC_CLI_FUZZ", "10000"))
SEED = int(os.environ.get("TINYSPEC_CLI_FUZZ_SEED", "0"))
DRIVER = Path(__file__).resolve().parents[1] / "support" / "cli_fuzz.py"
RSS_LIMIT_MIB = 1024


def test_cli_fuzz(tmp_path):
  work = tmp_path / "w"
  env = {**os.environ, "TINYSPEC_EVAL_BUDGET": "256M", "TINYSPEC_CACHE": str(tmp_path / "cache")}
  t0 = time.monotonic()
  total = {"inputs": 0, "failures": [], "exits": {}, "by_kind": {}, "peak_rss_mib": 0.0, "max_seconds": 0.0, "watchdog": 0}
  start = 0
  while True:
    r = subprocess.run([sys.executable, DRIVER, "--count", str(COUNT), "--seed", str(SEED), "--work", work, "--start", str(start)],
                       capture_output=True, text=True, env=env, timeout=3600)
    st = json.loads((work / "stats.json").read_text()) if (work / "stats.json").exists() else {}
    _add(total, st)
    if r.returncode == 0: break
    # ended by the CLI's watchdog (a native call past --timeout): bounded, exit 1; go on after that input
    assert r.returncode == 1 and "[run.timeout]" in r.stderr, r.stderr[-3000:]
    total["watchdog"] += 1
    start = json.loads((work / "progress").read_text())["index"]
  seconds = time.monotonic() - t0
  print(f"\nCLI fuzz: {total['inputs']} inputs {total['by_kind']} in {seconds:.0f} s, exits {total['exits']}, "
        f"peak RSS {total['peak_rss_mib']:.0f} MiB, slowest input {total['max_seconds']:.1f} s, watchdog exits {total['watchdog']}, "
        f"failures {len(total['failures'])}")
  assert not total["failures"], json.dumps(total["failures"][:5], indent=1)[:6000]
  assert total["inputs"] >= COUNT * 0.99
  assert total["peak_rss_mib"] < RSS_LIMIT_MIB


def _add(total: dict, st: dict) -> None:
  total["inputs"] += st.get("inputs", 0)
  total["failures"] += st.get("failures", [])
  for key in ("exits", "by_kind"):
    for k, v in st.get(key, {}).items(): total[key][k] = total[key].get(k, 0) + v
  total["peak_rss_mib"] = max(total["peak_rss_mib"], st.get("peak_rss_mib", 0), st.get("children_peak_rss_mib", 0))
  total["max_seconds"] = max(total["max_seconds"], st.get("max_seconds", 0))
