"""The language-neutral backend protocol: JSON lines over a process's stdin and stdout.

Any executable can be put through the conformance suite: the runner starts it, writes one
JSON object per line to its stdin and reads one JSON object per line from its stdout
(anything else goes to stderr). The messages, every key with its type and default, a
worked session and the two array encodings (.npy files, or inline JSON arrays chosen in
the hello: conformance/run/inline.py) are spec/protocol.schema.json, which the runner
checks every answer against and the protocol page renders (`tinyspec docs` writes
protocol.md):

  -> {"cmd": "hello", "protocol": 1, "arrays": ["npy", "inline"]}
  <- {"ok": true, "protocol": 1, "name": "mine", "arrays": "inline", "capabilities": {"ops": {"ADD": ["tensor"]}, ...}}
  -> {"cmd": "run", "id": "ADD/float32", "graph": "/abs/graph.json", "inputs": {"buf0": ...}, "dtypes": {...}, "out_dir": "/abs/dir"}
  <- {"id": "ADD/float32", "ok": true, "outputs": {"out0": ...}}    (or "ok": false, "error": "why", "rule": "RESHAPE.numel")
  -> {"cmd": "quit"}                                                (or end of input: exit)

A backend that crashes, hangs past the runner's time limit or answers with something
that is not a protocol line fails the case it was running; the runner starts it again
for the next. `tinyspec new-backend --lang c|python DIR` writes a starter backend;
`python -m tinyspec.conformance.run.worker --backend NAME` serves any registered Python
backend.
"""
from __future__ import annotations
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from functools import lru_cache
from pathlib import Path
import shlex
import jsonschema
import numpy as np
from tinyspec import spec
from tinyspec.conformance.run.selection import did_you_mean
from tinyspec.deadline import track_child, untrack_child
from tinyspec.limits import limits
from tinyspec.files import load_npy, save_npy
from tinyspec.conformance.run.inline import encode, decode, BadArray
from tinyspec.conformance.corpus.cases import save_array, dtype_of_array, storage_dtype

PROTOCOL = 1
ARRAYS = ("npy", "inline")   # the array encodings the runner offers in its hello (the backend picks one)
TOO_LONG = object()   # what the reader queues for a line over limits.max_line_bytes


# ------------------------------------------------------------------ the messages' form
@lru_cache(maxsize=None)
def schema() -> dict:
  """spec/protocol.schema.json: every message and key (the protocol page renders it)."""
  with open(spec.path("protocol.schema.json")) as f: return json.load(f)


@lru_cache(maxsize=None)
def _validator(message: str):
  s = schema()
  def items(validator, sub, instance, where):
    # the elements of an inline array's data: a loop over a few million integers, not a
    # schema validation per element (the same verdict, at list speed)
    if sub == {"type": "integer"} and validator.is_type(instance, "array"):
      if not all(type(x) is int for x in instance): yield jsonschema.ValidationError("every element must be a JSON integer")
      return
    yield from jsonschema.Draft202012Validator.VALIDATORS["items"](validator, sub, instance, where)
  cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"items": items})
  return cls({"$ref": f"#/$defs/{message}", "$defs": s["$defs"]})


def problem(msg, message: str) -> str | None:
  """What makes `msg` not a `message` of the protocol (a name of the schema's $defs:
  hello_answer, run_answer, ...), or None: the key's path and the fault, an unknown key
  with the nearest known one."""
  err = jsonschema.exceptions.best_match(_validator(message).iter_errors(msg))
  if err is None: return None
  where = ".".join(str(x) for x in err.absolute_path)
  if err.validator == "additionalProperties" and isinstance(err.instance, dict):
    known = list(err.schema.get("properties", {}))
    unknown = [k for k in err.instance if k not in known]
    key = str(unknown[0])[:60] if unknown else "?"
    return f"{where + ': ' if where else ''}unknown key {key!r}{did_you_mean(key, known)} (known: {', '.join(known)})"
  said = err.message if len(err.message) < 200 else err.message[:200] + "..."
  return f"'{where}': {said}" if where else said


class BackendDied(Exception):
  """The backend process crashed, hung or broke the protocol; `kind` is crash, timeout or protocol."""
  def __init__(self, kind: str, message: str):
    super().__init__(message)
    self.kind = kind


def _describe_exit(rc: int | None) -> str:
  if rc is None: return "still running"
  if rc < 0:
    try: name = signal.Signals(-rc).name
    except ValueError: name = f"signal {-rc}"
    return f"killed by {name}"
  return f"exited with status {rc}"


class BackendProcess:
  """One running backend process. request() sends a message and waits for the answer
  (at most `timeout` seconds); a crash or a hang raises BackendDied and leaves the
  process stopped (start() makes a new one)."""

  STDERR_KEPT = 64 * 1024    # bytes of the backend's stderr kept (its tail; the rest is read and dropped)
  STDERR_HEAD = 4096         # and its first bytes: where a program that cannot start says why (Node, a shell)

  def __init__(self, command: list[str], env: dict | None = None, cwd: str | None = None):
    self.command, self.env, self.cwd = list(command), env, cwd
    self.proc: subprocess.Popen | None = None
    self.lines: queue.Queue = queue.Queue()
    self.hello: dict | None = None
    self.arrays = "npy"          # the encoding its hello chose (ARRAYS)
    self._err: bytearray = bytearray()
    self._head: bytearray = bytearray()

  # -- lifecycle
  def start(self, timeout: float = 120.0) -> dict:
    self.stop()
    self._err, self._head = bytearray(), bytearray()
    try:
      self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=self.env, cwd=self.cwd, start_new_session=True)
    except OSError as e:
      raise BackendDied("crash", f"cannot start {' '.join(self.command)}: {e.strerror or e}") from None
    track_child(self.proc.pid)   # its process group, killed if this process is ended
    self.lines = queue.Queue()
    threading.Thread(target=self._read, args=(self.proc.stdout, self.lines, limits().max_line_bytes), daemon=True).start()
    self._drainer = threading.Thread(target=self._drain, args=(self.proc.stderr, self._err, self._head), daemon=True)
    self._drainer.start()
    self.hello = self.request({"cmd": "hello", "protocol": PROTOCOL, "arrays": list(ARRAYS)}, timeout)
    if not self.hello.get("ok"):
      why = str(self.hello.get('error', self.hello))[:2000]
      if self.hello.get("rule") == "backend.unavailable": raise BackendDied("unavailable", why)   # its own message says what to do
      raise BackendDied("protocol", f"the backend refused hello: {why}")
    why = problem(self.hello, "hello_answer")
    if why:
      self._kill(self.proc)
      raise BackendDied("protocol", f"{why} [backend.protocol]")
    self.arrays = self.hello.get("arrays", "npy")
    return self.hello

  @staticmethod
  def _read(stream, q, limit: int):
    """Lines of stdout onto q (None at the end); a line over `limit` bytes ends the
    reading with TOO_LONG (it is never buffered whole)."""
    try:
      while True:
        line = stream.readline(limit + 1)
        if not line: break
        if len(line) > limit and not line.endswith(b"\n"):
          q.put(TOO_LONG); return
        q.put(line)
    except (OSError, ValueError): pass
    q.put(None)

  @classmethod
  def _drain(cls, stream, keep: bytearray, head: bytearray):
    """Read stderr to its end, keeping its first STDERR_HEAD and last STDERR_KEPT bytes."""
    seen = 0
    try:
      for chunk in iter(lambda: stream.read1(65536), b""):
        if seen < cls.STDERR_HEAD: head += chunk[:cls.STDERR_HEAD - seen]
        seen += len(chunk)
        keep += chunk
        if len(keep) > 2 * cls.STDERR_KEPT: del keep[:len(keep) - cls.STDERR_KEPT]
    except (OSError, ValueError): pass

  def alive(self) -> bool: return self.proc is not None and self.proc.poll() is None

  def stop(self):
    p = self.proc
    self.proc = None
    if p is None: return
    if p.poll() is None:
      try:
        p.stdin.write(b'{"cmd": "quit"}\n'); p.stdin.flush()
        p.wait(timeout=2)
      except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    self._kill(p)   # whatever is left of its process group (what it started goes too)
    for s in (p.stdin, p.stdout, p.stderr):
      try: s.close()
      except (OSError, AttributeError): pass

  @staticmethod
  def _kill(p):
    try: os.killpg(p.pid, signal.SIGKILL)   # the backend and anything it started
    except (ProcessLookupError, PermissionError, OSError): pass
    try: p.wait(timeout=5)
    except subprocess.TimeoutExpired: pass
    untrack_child(p.pid)

  def kill(self):
    """End the backend's process group now (an interrupted run)."""
    p = self.proc
    if p is not None: self._kill(p)

  def stderr_summary(self, lines: int = 6, tail: int = 300) -> str:
    """The first `lines` lines of the backend's stderr and, when there is more, its last
    `tail` characters (a Python traceback ends with its error, Node's and a shell's
    start with it)."""
    head = bytes(self._head).decode(errors="replace").strip()
    if not head: return ""
    first = "\n".join(head.splitlines()[:lines])[:1200]
    whole = bytes(self._err).decode(errors="replace").strip()
    if len(self._head) < self.STDERR_HEAD and first == head: return first   # all of it
    end = whole[-tail:]
    return first if end in first else f"{first}\n...\n{end}"

  # -- one exchange
  def run(self, rid: str, graph, inputs: dict, out_dir, timeout: float, **extra) -> dict:
    """A run request for `inputs` (name -> (.npy path, dtype)) in the encoding the hello
    chose, and its answer, checked against the protocol's run_answer (BackendDied
    `protocol` where it is not one; RequestTooLong where the inputs do not fit a line)."""
    ans = self.request(run_message(rid, graph, inputs, out_dir, self.arrays, **extra), timeout)
    why = problem(ans, "run_answer")
    if why:
      if self.proc is not None: self._kill(self.proc)
      raise BackendDied("protocol", f"its answer to run: {why} [backend.protocol]")
    return ans

  def request(self, msg: dict, timeout: float) -> dict:
    p = self.proc
    if p is None or p.poll() is not None: raise BackendDied("crash", "the backend is not running")
    line = (json.dumps(msg) + "\n").encode()
    if len(line) > limits().max_line_bytes:
      raise RequestTooLong(f"the request is {len(line):,} bytes, over limits.max_line_bytes ({limits().max_line_bytes:,}): its arrays "
                           "do not fit one protocol line inline (a backend that also reads .npy files can choose \"arrays\": \"npy\") [file.limit]")
    try:
      p.stdin.write(line); p.stdin.flush()
    except (OSError, ValueError):
      return self._died("crash")
    deadline = time.monotonic() + timeout
    while True:
      left = deadline - time.monotonic()
      if left <= 0:
        self._kill(p)
        raise BackendDied("timeout", f"no answer within {timeout:g} s (killed)")
      try: line = self.lines.get(timeout=min(left, 1.0))
      except queue.Empty: continue
      if line is None: return self._died("crash")
      if line is TOO_LONG:
        self._kill(p)
        raise BackendDied("protocol", f"a line of more than {limits().max_line_bytes:,} bytes on stdout (limits.max_line_bytes) [backend.protocol]")
      try:
        ans = json.loads(line)
        if isinstance(ans, dict):
          if "id" in msg and "id" in ans and ans["id"] != msg["id"]:   # a stale line (a second answer to an earlier request)
            self._kill(p)
            raise BackendDied("protocol", f"an answer for {str(ans['id'])[:80]!r} to the request {str(msg['id'])[:80]!r} [backend.protocol]")
          return ans
      except (ValueError, RecursionError):
        pass
      self._kill(p)
      raise BackendDied("protocol", f"not a protocol line on stdout: {line[:200]!r} [backend.protocol]")

  def _died(self, kind):
    p = self.proc
    try: rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
      self._kill(p); rc = p.returncode
    self._drainer.join(timeout=2)   # what it wrote before dying, read to the end
    said = self.stderr_summary()
    raise BackendDied(kind, f"the backend {_describe_exit(rc)}" + (f"; stderr:\n{said}" if said else ""))


def worker_command(name: str) -> list[str]:
  """The command serving registered Python backend `name` over the protocol."""
  return [sys.executable, "-m", "tinyspec.conformance.run.worker", "--backend", name]


def split_command(spec: str) -> list[str]:
  return shlex.split(spec)


class BadAnswer(ValueError):
  """A run answer whose outputs are neither files in the run's out_dir nor inline arrays
  of the protocol's form (rule backend.protocol)."""


class RequestTooLong(ValueError):
  """A run request over limits.max_line_bytes (inline arrays too large for one line)."""


def answer_outputs(ans: dict, out_dir) -> dict:
  """The `outputs` of a run answer as name -> path or inline array, each path a file
  directly in out_dir (an answer naming any other file is refused: the runner reads only
  what the backend wrote where it was told to)."""
  outs = ans.get("outputs") or {}
  if not isinstance(outs, dict) or not all(isinstance(k, str) and isinstance(v, (str, dict)) for k, v in outs.items()):
    raise BadAnswer("'outputs' must map output names to file paths or inline arrays [backend.protocol]")
  d = Path(out_dir).resolve()
  for k, v in outs.items():
    if isinstance(v, str) and Path(v).resolve().parent != d:
      raise BadAnswer(f"output {k[:40]!r} is not a file in the run's out_dir: {v[:200]!r} [backend.protocol]")
  return outs


def run_message(rid: str, graph, inputs: dict, out_dir, arrays: str = "npy", **extra) -> dict:
  """A run request: `inputs` as name -> (.npy path, dtype), as write_inputs() and the
  corpus's cases give them, sent as paths (arrays "npy") or read and sent inline (arrays
  "inline": FileRefused where a file cannot be read); `extra`: fields of a protocol
  extension (the sanitizer child's)."""
  if arrays == "inline":
    sent = {k: encode(load_npy(p), dt) for k, (p, dt) in inputs.items()}
  else: sent = {k: str(p) for k, (p, _) in inputs.items()}
  return {"cmd": "run", "id": rid, "graph": str(graph), "out_dir": str(out_dir),
          "inputs": sent, "dtypes": {k: dt for k, (_, dt) in inputs.items()}, **extra}


def write_inputs(inputs: dict, folder: Path, declared: dict | None = None) -> dict:
  """Arrays as protocol .npy files in folder (bfloat16 as its uint16 bit patterns, as in
  the corpus): name -> (path, dtype), what run_message takes. The dtype is the array's, or
  the one `declared` names for it where that is stored alike (index for an int64 array)."""
  out = {}
  for k, v in inputs.items():
    v = np.asarray(v)
    dt = "bfloat16" if v.dtype.name == "bfloat16" else dtype_of_array(v)
    if (declared or {}).get(k) not in (None, dt) and storage_dtype(declared[k]) == storage_dtype(dt): dt = declared[k]
    p = Path(folder) / f"in.{k}.npy"
    save_array(p, v, dt)
    out[k] = (p, dt)
  return out


def read_outputs(ans: dict, out_dir) -> dict:
  """The arrays a run answer gives (storage form: bfloat16 as uint16 bit patterns): files
  in the run's folder read as checked .npy files (tinyspec.files), or inline arrays
  (conformance/run/inline.py); FileRefused or BadAnswer where they are neither."""
  out = {}
  for k, v in answer_outputs(ans, out_dir).items():
    try: out[k] = decode(v, f"output {k[:40]!r}") if isinstance(v, dict) else load_npy(v)
    except BadArray as e: raise BadAnswer(f"{e} [backend.protocol]") from None
  return out


def write_outputs(outputs: dict, out_dir: Path) -> dict:
  """Save a backend's outputs as protocol .npy files in out_dir: name -> path. Names are
  sanitized (tinyspec.files: an output named `../../x` is refused, rule path.name)."""
  return {k: str(save_npy(out_dir, k, v)) for k, v in outputs.items()}   # (bfloat16 as its uint16 bit patterns)
