"""A planted backend of planted.py behind the protocol: a program real `dask worker` processes
start as well as this one (tests/conformance/test_cluster_runs.py).

  python tests/support/planted_backend.py OP     # the reference with OP's planted bug (IDIV, MAX, PAD)

Where $PLANTED_ABSENT is set it refuses hello as an unavailable backend does (a worker
without it); where $PLANTED_MARKS names a folder, each run leaves a mark there naming
$PLANTED_WORKER (which worker ran it).
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
  if os.environ.get("PLANTED_ABSENT"):
    for line in sys.stdin:
      if json.loads(line).get("cmd") == "hello":
        print(json.dumps({"ok": False, "error": "the planted backend is absent here", "rule": "backend.unavailable"}), flush=True)
    return 0
  from planted import PlantedBackend
  from tinyspec.conformance.run import worker
  marks = os.environ.get("PLANTED_MARKS")
  backend = PlantedBackend(sys.argv[1])
  if marks:
    run = worker.handle_run
    def handle_run(b, msg, *rest):
      Path(marks, f"{os.environ.get('PLANTED_WORKER', '?')}.{os.getpid()}.{time.monotonic_ns()}").write_text("")
      return run(b, msg, *rest)
    worker.handle_run = handle_run
  return worker.serve(backend)


if __name__ == "__main__":
  sys.exit(main())
