"""The worker plugin of conformance/cluster.py (apart, so that reading the command line
never imports Dask)."""
from __future__ import annotations
import logging
from distributed.diagnostics.plugin import WorkerPlugin


class Declare(WorkerPlugin):
  """On each worker (now, and any that joins or restarts later) `probe()` names the
  resource tags tinyspec sees there, and the worker declares them beside what its
  --resources said, as many as it has threads."""
  idempotent = True

  def __init__(self, probe, name: str):
    self.probe, self.name = probe, name

  async def setup(self, worker):
    try: tags = list(self.probe())
    except Exception as e:   # a probe that fails declares nothing: the units that need a tag go elsewhere
      logging.getLogger("tinyspec").warning(f"tinyspec: probe {self.name} failed on {worker.address}: {e}")
      return
    have = worker.state.total_resources
    more = {t: float(worker.state.nthreads) for t in tags if t not in have}
    if more: await worker.set_resources(**more)
