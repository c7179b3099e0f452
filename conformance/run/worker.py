"""Serve a registered Python backend over the protocol of conformance/run/protocol.py:

  python -m tinyspec.conformance.run.worker --backend c [--arrays inline]

The conformance runner starts one of these per worker, so that a backend that crashes or
hangs takes only its own process down. stdout carries protocol lines only (anything the
backend prints goes to stderr). Arrays travel as .npy files; with --arrays inline (chosen in
the hello) as inline JSON arrays both ways, as an external backend may choose them:
`--backend "cmd:python -m tinyspec.conformance.run.worker --backend c --arrays inline"` runs
a built-in backend's cases through that encoding.
"""
from __future__ import annotations
import argparse
import json
import os
import sys
from pathlib import Path
import inspect
import numpy as np
from tinyspec.backends import Unavailable, capabilities_of, get_backend
from tinyspec.files import npy_form, load_npy, FileRefused
from tinyspec.conformance.corpus.cases import dtype_of_array, from_disk
from tinyspec.conformance.run.inline import encode, decode
from tinyspec.graph import load_file
from tinyspec.conformance.run.protocol import write_outputs, PROTOCOL


def _rule_of(e: BaseException) -> str | None:
  r = getattr(e, "rule", None)
  return r if isinstance(r, str) else None


def _request_error(msg: dict, inline: bool = False) -> str | None:
  """What is wrong with a run request's fields, or None."""
  if not isinstance(msg.get("graph"), str) or not isinstance(msg.get("out_dir"), str): return "a run needs 'graph' and 'out_dir' paths"
  for key, kind in (("inputs", dict if inline else str), ("dtypes", str)):
    v = msg.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, kind) for k, x in v.items()):
      return f"'{key}' must map names to {'inline arrays' if kind is dict else 'strings'}"
  return None


def _inline_outputs(outs: dict) -> dict:
  """A backend's outputs as inline arrays (conformance/run/inline.py), each of its array's dtype."""
  return {k: encode(npy_form(v), "bfloat16" if v.dtype.name == "bfloat16" else dtype_of_array(v))
          for k, v in ((k, np.asarray(v)) for k, v in outs.items())}


def handle_run(backend, msg: dict, inline: bool = False) -> dict:
  """One run request: the graph and the .npy inputs read as checked files (tinyspec.files),
  or the inline ones decoded, the outputs written under out_dir by sanitized names, or
  inline."""
  cid = msg.get("id")
  why = _request_error(msg, inline)
  if why: return {"id": cid, "ok": False, "error": why}
  g, diags = load_file(msg["graph"])
  fatal = [d for d in diags if d.fatal]
  if g is None or fatal:
    d = (fatal or diags)[0]
    return {"id": cid, "ok": False, "error": d.format(), "rule": d.rule}
  dts = msg.get("dtypes") or {}
  inputs = {}
  try:
    for k, p in (msg.get("inputs") or {}).items():
      a = decode(p, f"input {k[:40]!r}") if inline else load_npy(p)
      inputs[k] = from_disk(a, dts[k]) if k in dts else a
  except (FileRefused, KeyError, TypeError, ValueError) as e:
    return {"id": cid, "ok": False, "error": f"input: {e}"[:2000], "rule": getattr(e, "rule", None)}
  try:
    outs = backend.run(g, inputs)
    return {"id": cid, "ok": True, "outputs": _inline_outputs(outs) if inline else write_outputs(outs, Path(msg["out_dir"]))}
  except Exception as e:   # a refusal (or a crash in Python): the runner judges it
    return {"id": cid, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000], "rule": _rule_of(e)}


def own_manifest(backend) -> str:
  """The manifest a Python backend names (its `manifest` attribute), as an absolute path:
  relative to the file of the module that defines it."""
  p = Path(backend.manifest)
  if p.is_absolute(): return str(p)
  try: home = Path(inspect.getfile(backend if inspect.isclass(backend) else type(backend))).resolve().parent
  except (TypeError, OSError): home = Path.cwd()
  return str(home / p)


def serve(backend, stdin=None, stdout=None, arrays: str = "npy") -> int:
  stdin = stdin or sys.stdin
  out = stdout or sys.stdout
  for line in stdin:
    line = line.strip()
    if not line: continue
    try: msg = json.loads(line)
    except (ValueError, RecursionError):
      msg = None
    if not isinstance(msg, dict):
      ans = {"ok": False, "error": "not a JSON object"}
    else:
      cmd = msg.get("cmd")
      if cmd == "quit": break
      if cmd == "hello" and arrays not in (msg.get("arrays") or ["npy"]):
        ans = {"ok": False, "error": f"this backend reads arrays {arrays} only; the runner offers {msg.get('arrays')!r}"[:500]}
      elif cmd == "hello":
        try:
          caps = capabilities_of(backend).to_json()
          ans = {"ok": True, "protocol": PROTOCOL, "name": getattr(backend, "name", "?"), "arrays": arrays, "capabilities": caps}
          if getattr(backend, "manifest", None): ans["manifest"] = own_manifest(backend)
        except Unavailable as e:   # e.g. no OpenCL device that builds: its own message says what to do
          ans = {"ok": False, "error": str(e), "rule": e.rule}
        except Exception as e:
          ans = {"ok": False, "error": f"{type(e).__name__}: {e}"}
      elif cmd == "run":
        ans = handle_run(backend, msg, arrays == "inline")
      else:
        ans = {"ok": False, "error": f"unknown cmd {cmd!r}"}
    out.write(json.dumps(ans) + "\n"); out.flush()
  return 0


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description="serve a tinyspec backend over the conformance protocol (JSON lines)")
  ap.add_argument("--backend", required=True)
  ap.add_argument("--arrays", choices=["npy", "inline"], default="npy", help="the array encoding it chooses in the hello (default npy)")
  a = ap.parse_args(argv)
  proto = os.fdopen(os.dup(sys.stdout.fileno()), "w")
  os.dup2(sys.stderr.fileno(), sys.stdout.fileno())   # prints of the backend (and of C code) go to stderr
  sys.stdout = sys.stderr
  try: backend = get_backend(a.backend)
  except (KeyError, TypeError) as e:
    proto.write(json.dumps({"ok": False, "error": str(e)}) + "\n"); proto.flush()
    return 2
  return serve(backend, sys.stdin, proto, a.arrays)


if __name__ == "__main__":
  sys.exit(main())
