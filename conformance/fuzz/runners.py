"""The backends the fuzz runs its drawn graphs on: `run(drawn) -> {output name: array}`,
raising checks.Refused where the backend refuses the graph with a rule id (counted, not
failed) and anything else where it fails (a `run` failure).

  InProcess(backend)     the backend object called directly (tests; a crash takes the caller down)
  Isolated(spec)         behind the protocol in its own process (run/client.py): a crash or hang is a finding
"""
from __future__ import annotations
from tinyspec.backends import get_backend, capabilities_of
from tinyspec.conformance.corpus.cases import from_disk
from tinyspec.intervals import EXTENDED_FLOATS
from tinyspec.conformance.run.client import GraphClient, RunFailed
from tinyspec.conformance.fuzz.checks import Refused, views_of
from tinyspec.conformance.fuzz.graphs import Drawn


class InProcess:
  def __init__(self, backend):
    self.backend = get_backend(backend)
    self.name = getattr(self.backend, "name", "?")
    self.caps = capabilities_of(self.backend)

  def run(self, d: Drawn) -> dict:
    try: return self.backend.run(d.graph, d.inputs)
    except Exception as e:
      rule = getattr(e, "rule", None)
      if isinstance(rule, str): raise Refused(rule, str(e)) from None
      raise

  def stop(self): pass


class Isolated:
  def __init__(self, spec: str, timeout: float = 60.0, env: dict | None = None):
    self.client = GraphClient(spec, timeout, env=env)
    self.caps, self.name = self.client.caps, self.client.name

  def run(self, d: Drawn) -> dict:
    # (the messages keep the words the tinygrad triage reads: interop/hunt.py run_kind)
    try: outs = self.client.run(d.graph, d.inputs)
    except RunFailed as e:
      if e.kind == "refused" and e.rule is not None: raise Refused(e.rule, e.detail) from None
      if e.kind == "refused": raise RuntimeError(f"failed: {e.detail}") from None
      if e.kind == "output": raise RuntimeError(f"unreadable output: {e.detail}") from None
      raise RuntimeError(f"backend {e.kind}: {e.detail}") from None
    views = views_of(d.graph)
    out = {}
    for k, a in outs.items():
      i = d.outputs.get(k)
      out[k] = from_disk(a, views[i].dtype) if i is not None and views[i].dtype in EXTENDED_FLOATS else a
    return out

  def stop(self): self.client.stop()
