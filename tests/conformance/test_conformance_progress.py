"""The conformance progress bar (issue 16): an ETA from the rate so far on a terminal and
in the plain lines asked for with --progress; nothing at all on a non-terminal by default."""
from __future__ import annotations
import io
from tinyspec.conformance.run.report import Progress, eta
from tinyspec.conformance.run.runner import Result


class _Tty(io.StringIO):
  def isatty(self): return True


class _Clock:
  def __init__(self): self.t = 100.0
  def __call__(self): return self.t


def _feed(bar, clock, n, step):
  for _ in range(n):
    clock.t += step
    bar.update(Result("ADD/int32", "b", "pass"))


def test_the_bar_on_a_terminal_shows_the_time_left():
  s, clock = _Tty(), _Clock()
  bar = Progress(40, "c", stream=s, clock=clock)
  _feed(bar, clock, 10, 1.5)               # 10 done in 15 s: 30 left at 1.5 s each
  last = s.getvalue().split("\r")[-1]
  assert "10/40" in last and "15s" in last and "ETA 0:45" in last


def test_the_plain_lines_show_it_too_and_a_non_terminal_gets_nothing_by_default():
  s, clock = io.StringIO(), _Clock()
  _feed(Progress(20, "c", stream=s, clock=clock), clock, 20, 1.0)
  assert s.getvalue() == ""                # not a terminal, not asked for: quiet
  s, clock = io.StringIO(), _Clock()
  _feed(Progress(20, "c", enabled=True, stream=s, clock=clock), clock, 5, 30.0)   # a line each tenth (every 2)
  assert s.getvalue().splitlines()[-1] == "c: 5/20 done, 0 unexpected, 150s, ETA 7:30" and "\r" not in s.getvalue()


def test_eta_format():
  assert eta(0, 0, 10) == "ETA ?" and eta(5, 10, 10) == "ETA 0:00"
  assert eta(3600, 1, 3) == "ETA 2:00:00" and eta(59.6, 1, 2) == "ETA 1:00"
