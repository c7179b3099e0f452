"""A graph and its arrays run on any backend (registered, cmd:COMMAND or an executable)
through the protocol, in the backend's own process: the one client of protocol.py for
graphs that are not corpus cases (`tinyspec run FILE --backend NAME`, the fuzz's isolated
runs, fuzz/runners.py). The case runner (execute.py) sends the corpus's own files in the
same run messages.

    with GraphClient("c") as c: outs = c.run(graph, {"buf0": x})   # output name -> array
"""
from __future__ import annotations
import shutil
import tempfile
from pathlib import Path
from tinyspec.files import FileRefused
from tinyspec.graph import Graph, load_file
from tinyspec.conformance.run.execute import CaseRunner
from tinyspec.conformance.run.protocol import BackendDied, BadAnswer, RequestTooLong, read_outputs, write_inputs
from tinyspec.validate import validate
from tinyspec.conformance.corpus.casegen import input_names

RUN_FOLDERS = 4   # a run's files are kept until this many runs later (a caller may still read them)


class RunFailed(RuntimeError):
  """A run that gave no outputs: `kind` is refused (with the backend's `rule` where it gave
  one), crash, timeout or protocol (the backend died, hung or broke the protocol), output
  (it named files that are not its outputs) or input (the inputs do not fit one protocol
  line inline); `detail` is what the backend or the protocol said."""
  def __init__(self, kind: str, message: str, detail: str, rule: str | None = None):
    super().__init__(message)
    self.kind, self.detail, self.rule = kind, detail, rule


class GraphClient:
  """One backend process (started here; BackendUnavailable where it does not start) that
  runs graphs given as Graph objects or graph files, with their inputs as arrays."""

  def __init__(self, spec: str, timeout: float = 60.0, project: Path | None = None, env: dict | None = None):
    self.runner = CaseRunner(spec, timeout=timeout, project=project, env=env)
    self.caps = self.runner.capabilities()
    self.name = self.runner.name
    self.proc = self.runner._procs[0]
    self.tmp = Path(tempfile.mkdtemp(prefix="tinyspec-run-"))
    self.n = 0

  def __enter__(self): return self

  def __exit__(self, *exc): self.stop()

  def run(self, graph: Graph | str | Path, inputs: dict) -> dict:
    """Output name -> array as the backend wrote it (bfloat16 as its uint16 bit patterns);
    RunFailed where it gives none. A backend that died is started again for the next run."""
    self.n += 1
    work = self.tmp / f"r{self.n % RUN_FOLDERS}"
    work.mkdir(exist_ok=True)
    if isinstance(graph, Graph): (path := work / "graph.json").write_text(graph.dumps())
    else: path = Path(graph).resolve()
    try:
      if not self.proc.alive(): self.proc.start()
      ans = self.proc.run(f"run{self.n}", path, write_inputs(inputs, work, buffer_dtypes(graph)), work, self.runner.timeout)
    except BackendDied as e:
      raise RunFailed(e.kind, f"backend {self.name} {e.kind}: {e}", str(e)) from None
    except RequestTooLong as e:
      raise RunFailed("input", f"backend {self.name}: {e}", str(e), "file.limit") from None
    if not ans.get("ok"):
      error = str(ans.get("error", "no reason given"))
      rule = ans.get("rule") if isinstance(ans.get("rule"), str) else None
      raise RunFailed("refused", f"backend {self.name} refused: {error}", error, rule)
    try: return read_outputs(ans, work)
    except (FileRefused, BadAnswer) as e:
      raise RunFailed("output", f"backend {self.name}: unreadable output: {e}", str(e)) from None

  def stop(self):
    self.proc.stop()
    shutil.rmtree(self.tmp, ignore_errors=True)


def buffer_dtypes(graph: Graph | str | Path) -> dict:
  """Input name -> the dtype its BUFFER or PARAM declares ({} for a graph that does not
  load): an int64 array sent to an index buffer is sent as index."""
  g = graph if isinstance(graph, Graph) else load_file(graph)[0]
  if g is None: return {}
  views = validate(g).views
  return {name: views[i].dtype for name, i in input_names(g, views).items()}


def run_graph(spec: str, graph_file, inputs: dict, timeout: float = 60.0, project: Path | None = None) -> dict:
  """Run one graph file on backend `spec` in a process of its own: output name -> array.
  BackendUnavailable if it does not start; RunFailed (a RuntimeError, with .rule where the
  backend gave one) if it refuses, dies or hangs."""
  with GraphClient(spec, timeout, project) as c: return c.run(graph_file, inputs)
