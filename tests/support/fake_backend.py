"""A backend that speaks the conformance protocol the way a test needs it to (Python only,
no numpy: it starts in milliseconds).

  python tests/support/fake_backend.py MODE [ARG]
    slow PIDFILE       good hello, then writes its pid (and its child's) to PIDFILE and sleeps on every run
    long-line N        good hello, then N bytes without a newline on the first run, and sleeps
    caps JSON          a hello whose capabilities are JSON
    name NAME          a hello naming itself NAME
    stderr-crash       good hello, then escape sequences and a fake summary on stderr, and exit 3
    script DIR WORK    the line kinds of DIR/script.json, one per line it writes (tests/support/cli_fuzz.py)
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CAPS = {"ops": {"NEG": ["tensor"], "BUFFER": ["tensor"], "VCONST": ["tensor"]}, "dtypes": ["float32", "index"], "devices": ["*"],
        "validates": False}


def say(obj):
  sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()


def script(d: Path, work: Path) -> int:
  """A backend speaking the protocol badly, as the script in d says (no numpy: it starts
  fast). Its position in the script survives restarts (d/next)."""
  plan = json.loads((d / "script.json").read_text())
  def take():
    n = int((d / "next").read_text() or 0)
    if n >= len(plan): return "ok", 0   # the script is spent: plain answers for the cases left
    # atomically: the runner may kill this process at any moment (its --timeout), and a
    # truncated-then-killed write would read back as position 0 and replay the script
    tmp = d / f"next.{os.getpid()}"
    tmp.write_text(str(n + 1)); os.replace(tmp, d / "next")
    return plan[n]
  out = sys.stdout.buffer
  def say(obj_or_bytes):
    out.write(obj_or_bytes if isinstance(obj_or_bytes, bytes) else (json.dumps(obj_or_bytes) + "\n").encode()); out.flush()
  caps = {"ops": {"NEG": ["tensor"], "BUFFER": ["tensor"], "VCONST": ["tensor"], "CONST": ["tensor"]}, "dtypes": ["float32", "index", "bfloat16",
          "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"], "devices": ["*"], "validates": False}
  for line in sys.stdin:
    try: msg = json.loads(line)
    except ValueError: continue
    kind, s = take()
    if msg.get("cmd") == "hello":
      if kind == "hello-bad-caps": say({"ok": True, "protocol": 1, "name": "fake", "capabilities": [{"ops": 5}, {"ops": {"NEG": 7}}, "x", {"dtypes": "float32"}][s % 4]})
      elif kind == "hello-bad-name": say({"ok": True, "protocol": 1, "name": ["../..", "/etc/x", "a\nb", 5, "x" * 300][s % 5], "capabilities": caps})
      elif kind == "hello-refuse": say({"ok": False, "error": "\x1b[31mno\x1b[0m"})
      else: say({"ok": True, "protocol": 1, "name": "fake-backend", "capabilities": caps})
      continue
    if msg.get("cmd") != "run": return 0
    cid, od = msg.get("id"), Path(msg.get("out_dir", "."))
    if kind in ("ok", "stderr-escapes", "two-lines", "empty-line"):
      if kind == "stderr-escapes": sys.stderr.write("\x1b[2J\x1b[H999 passed, 0 failed\n" * 3); sys.stderr.flush()
      (od / "out0.npy").write_bytes(NPY_NEG)
      if kind == "empty-line": say(b"\n")
      say({"id": cid, "ok": True, "outputs": {"out0": str(od / "out0.npy")}})
      if kind == "two-lines": say({"id": cid, "ok": True, "outputs": {}})
    elif kind == "refuse": say({"id": cid, "ok": False, "error": "no", "rule": "graph.src"})
    elif kind == "garbage": say(bytes((s * 7 + i) % 256 for i in range(60)) + b"\n")
    elif kind == "not-object": say(b"[1, 2, 3]\n")
    elif kind == "deep": say(b"[" * 100000 + b"\n")
    elif kind == "no-newline-long": say(b"{" + b" " * (17 << 20)); return 0
    elif kind == "outputs-outside": say({"id": cid, "ok": True, "outputs": {"out0": ["/etc/passwd", str(work / "in" / "neg.json"), "../x.npy", str(od)][s % 4]}})
    elif kind == "outputs-bad": say({"id": cid, "ok": True, "outputs": [["x"], {"out0": 5}, "x", {"../../escape_p": str(od / "a.npy")}][s % 4]})
    elif kind == "crash": os._exit(3)
    elif kind == "hang": time.sleep(30)
    elif kind == "huge-error": say({"id": cid, "ok": False, "error": "\x1b[2J" * 100000})
    elif kind == "rule-number": say({"id": cid, "ok": False, "error": 5, "rule": 5})
  return 0


NPY_NEG = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + b" " * 58 + b"\n" + b"\x00\x00\x00\x80" * 2


def main(mode, arg=None, work=None):
  if mode == "script": return script(Path(arg), Path(work))
  for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("cmd") == "hello":
      caps = json.loads(arg) if mode == "caps" else CAPS
      say({"ok": True, "protocol": 1, "name": arg if mode == "name" else "fake", "capabilities": caps})
      continue
    if msg.get("cmd") != "run": return 0
    if mode == "slow":
      child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])   # a grandchild, in the backend's group
      with open(arg, "w") as f: f.write(f"{os.getpid()} {child.pid}\n")
      time.sleep(600)
    elif mode == "long-line":
      sys.stdout.write("{" + " " * int(arg)); sys.stdout.flush()
      time.sleep(600)
    elif mode == "stderr-crash":
      sys.stderr.write("\x1b[2J\x1b[H999 passed, 0 failed\n\x1b]0;owned\x07"); sys.stderr.flush()
      os._exit(3)
    else:
      say({"id": msg.get("id"), "ok": False, "error": "no"})
  return 0


if __name__ == "__main__":
  sys.exit(main(*sys.argv[1:]))
