"""Writing results: JUnit XML (for CI), the progress line, and the coverage file
docs/conformance-results.json ({backend: {op: {dtype: status}}}, rendered into
docs/status.md by tools/gen_docs.py)."""
from __future__ import annotations
import json
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr
from tinyspec.conformance.runner import profile_summary


def junit_xml(results, suite: str) -> str:
  """One <testsuite> per backend, one <testcase> per result: fail and xpass are
  <failure>, error is <error>, skip and unsupported are <skipped>, xfail passes with
  the reason in <system-out>. Properties: the suite's `profile.strict`/`profile.portable`
  (met or not met), each case's verdict in both profiles."""
  by: dict = {}
  for r in results: by.setdefault(r.backend, []).append(r)
  out = ['<?xml version="1.0" encoding="UTF-8"?>', f"<testsuites name={quoteattr(suite)}>"]
  for backend, rs in by.items():
    fails = sum(r.status in ("fail", "xpass") for r in rs)
    errs = sum(r.status == "error" for r in rs)
    skips = sum(r.status in ("skip", "unsupported") for r in rs)
    total = sum(r.seconds for r in rs)
    out.append(f"  <testsuite name={quoteattr(backend)} tests=\"{len(rs)}\" failures=\"{fails}\" errors=\"{errs}\" skipped=\"{skips}\" time=\"{total:.3f}\">")
    ps = profile_summary(rs)   # which conformance profile the backend meets (strict, portable)
    out.append("    <properties>" + "".join(f"<property name={quoteattr('profile.' + p)} value={quoteattr('met' if v['met'] else 'not met')}/>"
                                            for p, v in ps.items()) + "</properties>")
    for r in rs:
      cls, _, name = r.case.rpartition("/")
      head = f"    <testcase classname={quoteattr(backend + '.' + cls.replace('/', '.') if cls else backend)} name={quoteattr(name or r.case)} time=\"{r.seconds:.3f}\""
      msg = quoteattr(r.message[:300])
      props = "<properties>" + "".join(f"<property name={quoteattr('profile.' + p)} value={quoteattr(v)}/>" for p, v in r.profiles.items()) + "</properties>" if r.profiles else ""
      if r.status in ("fail", "xpass"): out.append(f"{head}>{props}<failure message={msg}>{escape(r.message)}</failure></testcase>")
      elif r.status == "error": out.append(f"{head}>{props}<error message={msg}>{escape(r.message)}</error></testcase>")
      elif r.status in ("skip", "unsupported"): out.append(f"{head}><skipped message={msg}/></testcase>")
      elif r.status == "xfail": out.append(f"{head}>{props}<system-out>{escape('expected failure: ' + r.message)}</system-out></testcase>")
      elif props: out.append(f"{head}>{props}</testcase>")
      else: out.append(f"{head}/>")
    out.append("  </testsuite>")
  out.append("</testsuites>")
  return "\n".join(out) + "\n"


def merge_coverage(path: Path, backend: str, cov: dict) -> dict:
  """Put one backend's coverage into the results file (other backends' entries stay)."""
  path = Path(path)
  data = {}
  if path.is_file():
    try: data = json.loads(path.read_text())
    except ValueError: data = {}
    if not isinstance(data, dict): data = {}
  data[backend] = cov
  path.write_text(json.dumps(dict(sorted(data.items())), indent=1, sort_keys=True) + "\n")
  return data


class Progress:
  """A progress bar on stderr: one line redrawn in place on a terminal; plain lines (each
  tenth of the run) when asked for (--progress) without one; nothing otherwise."""

  def __init__(self, total: int, label: str, enabled: bool | None = None, stream=None):
    self.stream = stream or sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.on = self.tty if enabled is None else enabled
    self.total, self.label, self.n = total, label, 0
    self.bad = 0
    self.t0 = time.monotonic()
    self.next_line = 0

  def update(self, r):
    self.n += 1
    self.bad += r.status in ("fail", "error", "xpass")
    if not self.on: return
    if self.tty:
      w = 30
      done = int(w * self.n / max(self.total, 1))
      self.stream.write(f"\r{self.label} [{'#' * done}{'.' * (w - done)}] {self.n}/{self.total}  {self.bad} unexpected  {time.monotonic() - self.t0:.0f}s ")
      self.stream.flush()
    elif self.n >= self.next_line or self.n == self.total:
      self.stream.write(f"{self.label}: {self.n}/{self.total} done, {self.bad} unexpected, {time.monotonic() - self.t0:.0f}s\n")
      self.stream.flush()
      self.next_line = self.n + max(1, self.total // 10)

  def close(self):
    if self.on and self.tty: self.stream.write("\n"); self.stream.flush()
