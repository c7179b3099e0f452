"""The language-neutral backend protocol: JSON lines over a process's stdin and stdout.

Any executable can be put through the conformance suite: the runner starts it, writes one
JSON object per line to its stdin and reads one JSON object per line from its stdout
(anything else goes to stderr). Arrays travel as .npy files (bfloat16 as its uint16 bit
patterns, as in the corpus); paths are absolute.

  -> {"cmd": "hello", "protocol": 1}
  <- {"ok": true, "protocol": 1, "name": "mine",
      "capabilities": {"ops": {"ADD": ["tensor"], ...}, "dtypes": ["float32", ...], "devices": ["*"],
                       "decomposed": false}}
  -> {"cmd": "run", "id": "ADD/float32", "graph": "/abs/graph.json",
      "inputs": {"buf0": "/abs/in.buf0.npy"}, "dtypes": {"buf0": "float32"}, "out_dir": "/abs/tmp/dir"}
  <- {"id": "ADD/float32", "ok": true, "outputs": {"out0": "/abs/tmp/dir/out0.npy"}}
  <- {"id": "ADD/float32", "ok": false, "error": "why", "rule": "RESHAPE.numel"}   (a refusal; rule optional)
  -> {"cmd": "quit"}                                     (or end of input: exit)

Outputs are named as refimpl.evaluate names them (docs/architecture.md): `out{k}` for the
k-th value root, the input name of every stored buffer for void roots. A backend that
crashes, hangs past the runner's time limit or answers with something that is not a
protocol line fails the case it was running; the runner starts it again for the next.
`conformance/examples/numpy_backend.py` is a small backend written against this protocol
alone; `python -m conformance.worker --backend NAME` serves any registered Python backend.
"""
from __future__ import annotations
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PROTOCOL = 1


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

  def __init__(self, command: list[str], env: dict | None = None, cwd: str | None = None):
    self.command, self.env, self.cwd = list(command), env, cwd
    self.proc: subprocess.Popen | None = None
    self.lines: queue.Queue = queue.Queue()
    self.hello: dict | None = None
    self._err = None

  # -- lifecycle
  def start(self, timeout: float = 120.0) -> dict:
    self.stop()
    self._err = tempfile.TemporaryFile(mode="w+b")
    try:
      self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                   env=self.env, cwd=self.cwd, start_new_session=True)
    except OSError as e:
      raise BackendDied("crash", f"cannot start {' '.join(self.command)}: {e.strerror or e}") from None
    self.lines = queue.Queue()
    threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
    self.hello = self.request({"cmd": "hello", "protocol": PROTOCOL}, timeout)
    if not self.hello.get("ok"):
      raise BackendDied("protocol", f"the backend refused hello: {self.hello.get('error', self.hello)}")
    return self.hello

  @staticmethod
  def _read(stream, q):
    for line in iter(stream.readline, b""): q.put(line)
    q.put(None)

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
        self._kill(p)
    for s in (p.stdin, p.stdout):
      try: s.close()
      except OSError: pass

  @staticmethod
  def _kill(p):
    try: os.killpg(p.pid, signal.SIGKILL)   # the backend and anything it started
    except (ProcessLookupError, PermissionError): pass
    try: p.wait(timeout=5)
    except subprocess.TimeoutExpired: pass

  def stderr_tail(self, n: int = 600) -> str:
    if self._err is None: return ""
    try:
      self._err.seek(0, os.SEEK_END); size = self._err.tell()
      self._err.seek(max(0, size - n)); return self._err.read().decode(errors="replace").strip()
    except (OSError, ValueError): return ""

  # -- one exchange
  def request(self, msg: dict, timeout: float) -> dict:
    p = self.proc
    if p is None or p.poll() is not None: raise BackendDied("crash", "the backend is not running")
    try:
      p.stdin.write((json.dumps(msg) + "\n").encode()); p.stdin.flush()
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
      try:
        ans = json.loads(line)
        if isinstance(ans, dict): return ans
      except ValueError:
        pass
      self._kill(p)
      raise BackendDied("protocol", f"not a protocol line on stdout: {line[:200]!r}")

  def _died(self, kind):
    p = self.proc
    try: rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
      self._kill(p); rc = p.returncode
    tail = self.stderr_tail()
    raise BackendDied(kind, f"the backend {_describe_exit(rc)}" + (f"; stderr: ...{tail[-300:]}" if tail else ""))


def worker_command(name: str) -> list[str]:
  """The command serving registered Python backend `name` over the protocol."""
  return [sys.executable, "-m", "tinyspec.conformance.worker", "--backend", name]


def split_command(spec: str) -> list[str]:
  import shlex
  return shlex.split(spec)


def write_outputs(outputs: dict, out_dir: Path) -> dict:
  """Save a backend's outputs as protocol .npy files: name -> path."""
  import numpy as np
  out = {}
  for k, v in outputs.items():
    v = np.asarray(v)
    if v.dtype.name == "bfloat16": v = np.array(v, order="C").view(np.uint16)
    p = Path(out_dir) / f"{k}.npy"
    np.save(p, v, allow_pickle=False)
    out[k] = str(p)
  return out
