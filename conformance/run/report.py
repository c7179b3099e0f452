"""Writing results: JUnit XML (for CI), the progress line, and the coverage file
docs/conformance-results.json ({backend: {op: {dtype: status}}}, rendered into
docs/status.md by tools/gen_docs.py)."""
from __future__ import annotations
import json
import sys
import time
from pathlib import Path
import xml.etree.ElementTree as ET
from tinyspec.files import printable, read_text, write_file, FileRefused
from tinyspec.conformance.run.runner import profile_summary


def junit_xml(results, suite: str) -> str:
  """One <testsuite> per backend, one <testcase> per result: fail and xpass are
  <failure>, error is <error>, skip and unsupported are <skipped>, xfail passes with
  the reason in <system-out>. Properties: the suite's `profile.strict`/`profile.portable`
  (met or not met), each case's verdict in both profiles. Written by xml.etree.ElementTree
  (escaping), every text through printable() first (control characters, which XML 1.0
  cannot hold, escaped)."""
  by: dict = {}
  for r in results: by.setdefault(r.backend, []).append(r)
  root = ET.Element("testsuites", name=printable(suite))
  for backend, rs in by.items():
    el = ET.SubElement(root, "testsuite", name=printable(backend), tests=str(len(rs)),
                       failures=str(sum(r.status in ("fail", "xpass") for r in rs)), errors=str(sum(r.status == "error" for r in rs)),
                       skipped=str(sum(r.status in ("skip", "unsupported") for r in rs)), time=f"{sum(r.seconds for r in rs):.3f}")
    props = ET.SubElement(el, "properties")   # which conformance profile the backend meets (strict, portable)
    for p, v in profile_summary(rs).items():
      ET.SubElement(props, "property", name="profile." + p, value="met" if v["met"] else "not met")
    for r in rs:
      cls, _, name = r.case.rpartition("/")
      tc = ET.SubElement(el, "testcase", classname=printable(backend + "." + cls.replace("/", ".") if cls else backend),
                         name=printable(name or r.case), time=f"{r.seconds:.3f}")
      if r.profiles and r.status not in ("skip", "unsupported"):
        cp = ET.SubElement(tc, "properties")
        for p, v in r.profiles.items(): ET.SubElement(cp, "property", name="profile." + p, value=v)
      text = printable(r.message, newline="\n")
      if r.status in ("fail", "xpass"): ET.SubElement(tc, "failure", message=text[:300]).text = text
      elif r.status == "error": ET.SubElement(tc, "error", message=text[:300]).text = text
      elif r.status in ("skip", "unsupported"): ET.SubElement(tc, "skipped", message=text[:300])
      elif r.status == "xfail": ET.SubElement(tc, "system-out").text = "expected failure: " + text
  ET.indent(root, "  ")
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def merge_coverage(path: Path, backend: str, cov: dict) -> dict:
  """Put one backend's coverage into the results file (other backends' entries stay)."""
  path = Path(path)
  data = {}
  if path.exists():
    try: data = json.loads(read_text(path, 64 << 20, "the coverage file"))
    except (FileRefused, ValueError, RecursionError): data = {}
    if not isinstance(data, dict): data = {}
  data[backend] = cov
  write_file(path, json.dumps(dict(sorted(data.items())), indent=1, sort_keys=True) + "\n")
  return data


def eta(elapsed: float, done: int, total: int) -> str:
  """The time left at the rate so far, as `ETA m:ss` (`ETA h:mm:ss` past an hour); `ETA ?`
  before the first result. Hand-written rather than tqdm: four lines, where the bar's
  other needs (the unexpected count, plain lines on request without a terminal) would
  have to be bent into tqdm's format anyway."""
  if done <= 0 or total <= done: return "ETA ?" if done <= 0 else "ETA 0:00"
  left = int(round(elapsed / done * (total - done)))
  h, m, s = left // 3600, left // 60 % 60, left % 60
  return f"ETA {h}:{m:02d}:{s:02d}" if h else f"ETA {m}:{s:02d}"


class Progress:
  """A progress bar on stderr: one line redrawn in place on a terminal, with the time
  spent and the time left (ETA); plain lines (each tenth of the run) when asked for
  (--progress) without one; nothing otherwise."""

  def __init__(self, total: int, label: str, enabled: bool | None = None, stream=None, clock=time.monotonic):
    self.clock = clock
    self.stream = stream or sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.on = self.tty if enabled is None else enabled
    self.total, self.label, self.n = total, printable(label), 0
    self.bad = 0
    self.t0 = clock()
    self.next_line = 0

  def update(self, r):
    self.n += 1
    self.bad += r.status in ("fail", "error", "xpass")
    if not self.on: return
    if self.tty:
      w = 30
      done = int(w * self.n / max(self.total, 1))
      t = self.clock() - self.t0
      self.stream.write(f"\r{self.label} [{'#' * done}{'.' * (w - done)}] {self.n}/{self.total}  {self.bad} unexpected  {t:.0f}s  {eta(t, self.n, self.total)} ")
      self.stream.flush()
    elif self.n >= self.next_line or self.n == self.total:
      t = self.clock() - self.t0
      self.stream.write(f"{self.label}: {self.n}/{self.total} done, {self.bad} unexpected, {t:.0f}s, {eta(t, self.n, self.total)}\n")
      self.stream.flush()
      self.next_line = self.n + max(1, self.total // 10)

  def close(self):
    if self.on and self.tty: self.stream.write("\n"); self.stream.flush()
