"""Checks shared by the tests of `tinyspec show`: the SVG's node elements, a strict reader
of the dot subset it writes, and a PNG reader (stdlib only) to tell a blank screenshot."""
from __future__ import annotations
import re
import shutil
import subprocess
from pathlib import Path
import struct
import zlib
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def svg_nodes(text: str) -> list:
  """The <g class="node ..."> elements of an SVG document (parsing it: it must be XML)."""
  root = ET.fromstring(text)
  assert root.tag == SVG + "svg"
  return [g for g in root.iter(SVG + "g") if "node" in g.get("class", "").split()]


def title_of(g) -> str:
  t = g.find(SVG + "title")
  return t.text if t is not None else ""


# ------------------------------------------------------------------ dot
_TOKEN = re.compile(r'\s+|"(?:[^"\\]|\\.)*"|->|[{}\[\];=,]|[A-Za-z_][A-Za-z0-9_]*|-?[0-9]+(?:\.[0-9]+)?')


def _tokens(text: str) -> list[str]:
  out, at = [], 0
  while at < len(text):
    m = _TOKEN.match(text, at)
    assert m, f"dot: cannot read {text[at:at + 40]!r} at {at}"
    if not m.group().isspace(): out.append(m.group())
    at = m.end()
  return out


def parse_dot(text: str) -> dict:
  """Read the dot `tinyspec show` writes (digraph; graph/node/edge defaults; nodes;
  nested subgraph clusters; edges), strictly: {'nodes': {id: attrs}, 'edges': [(a, b,
  attrs)], 'clusters': [name]}. Fails on anything else, an unterminated string, or an
  edge to an undeclared node."""
  toks, pos = _tokens(text), [0]
  out = {"nodes": {}, "edges": [], "clusters": []}

  def peek(): return toks[pos[0]] if pos[0] < len(toks) else None
  def take(want=None):
    t = peek()
    assert t is not None and (want is None or t == want), f"dot: expected {want!r}, got {t!r} at token {pos[0]}"
    pos[0] += 1
    return t
  def ident():
    t = take()
    assert t.startswith('"') or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|-?[0-9.]+", t), f"dot: not an id: {t!r}"
    return t[1:-1] if t.startswith('"') else t
  def attrs():
    d = {}
    if peek() != "[": return d
    take("[")
    while peek() != "]":
      k = ident(); take("="); d[k] = ident()
      if peek() == ",": take(",")
    take("]")
    return d
  def stmts():
    while peek() != "}":
      t = peek()
      if t in ("graph", "node", "edge"): take(); attrs(); take(";")
      elif t == "subgraph":
        take(); name = ident(); out["clusters"].append(name); take("{"); stmts(); take("}")
      else:
        a = ident()
        if peek() == "->":
          take("->"); b = ident(); out["edges"].append((a, b, attrs()))
        else: out["nodes"][a] = attrs()
        take(";")
  take("digraph"); ident(); take("{"); stmts(); take("}")
  assert pos[0] == len(toks), "dot: text after the graph"
  for a, b, _ in out["edges"]:
    assert a in out["nodes"] and b in out["nodes"], f"dot: edge {a} -> {b} names an undeclared node"
  return out


# ------------------------------------------------------------------ PNG
def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
  """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what
  Chromium's --screenshot writes)."""
  assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
  at, idat, head = 8, b"", None
  while at < len(data):
    (n,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
    body = data[at + 8:at + 8 + n]
    if kind == b"IHDR": head = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT": idat += body
    at += 12 + n
  w, h, depth, color, _, _, interlace = head
  assert depth == 8 and color in (2, 6) and interlace == 0, f"PNG form {head} not read here"
  bpp = 3 if color == 2 else 4
  raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
  for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
      a = line[i - bpp] if i >= bpp else 0
      b, c = prev[i], prev[i - bpp] if i >= bpp else 0
      if f == 1: line[i] = (line[i] + a) & 255
      elif f == 2: line[i] = (line[i] + b) & 255
      elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
      elif f == 4:
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
  return w, h, rows


def ink(png: bytes, step: int = 3) -> tuple[float, int]:
  """(the share of sampled pixels that are not white, the number of distinct colours)."""
  w, h, rows = read_png(png)
  bpp = len(rows[0]) // w
  seen, dark, total = set(), 0, 0
  for y in range(0, h, step):
    r = rows[y]
    for x in range(0, w, step):
      px = r[x * bpp:x * bpp + 3]
      total += 1
      if px != b"\xff\xff\xff": dark += 1
      seen.add(px)
  return dark / total, len(seen)


# a headless browser (Chromium from Debian, installed by scripts/setup.sh where it may), shared by
# the show pages' tests and the conformance report's
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--enable-logging=stderr", "--v=0"]


def browse(tmp_path: Path, page: Path, *extra: str) -> tuple[str, list[str]]:
  """Load a page in a fresh browser profile: (what it printed: the DOM or nothing, the
  console messages it logged)."""
  profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
  r = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                     capture_output=True, timeout=300, cwd=tmp_path)
  err = r.stderr.decode(errors="replace")
  assert r.returncode == 0, err[-2000:]
  return r.stdout.decode(errors="replace"), [line for line in err.splitlines() if ":CONSOLE" in line]
