"""`tinyspec show` against hostile files (issue 13's rules applied to the command merged
after it): graph files and stage folders are read as regular files, the picture is written
only at the OUT the user gave (through a temporary name, never following a planted link),
--timeout bounds it, diagnostics are capped and terminal text is escaped."""
from __future__ import annotations
import json
import os
import time
from hostile import cli, console, assert_refused, neg_graph, write_json


def test_an_output_that_cannot_be_written_is_a_clear_error(tmp_path):
  g = write_json(tmp_path / "g.json", neg_graph())
  assert_refused(["show", g, "-o", "/proc/nope/x.svg"], "path.write", 2, "cannot write")
  (tmp_path / "d.svg").mkdir()
  assert_refused(["show", g, "-o", tmp_path / "d.svg"], "path.write", 2, "cannot write")
  assert os.listdir(tmp_path / "d.svg") == [] and sorted(os.listdir(tmp_path)) == ["d.svg", "g.json"]   # no temporary file left


def test_a_planted_link_at_out_is_replaced_not_followed(tmp_path):
  victim = tmp_path / "victim.txt"; victim.write_text("keep me")
  out = tmp_path / "pic.svg"; out.symlink_to(victim)
  g = write_json(tmp_path / "g.json", neg_graph())
  rc, text = cli("show", g, "-o", out)
  assert rc == 0, text
  assert victim.read_text() == "keep me" and not out.is_symlink() and out.read_text().startswith("<svg")


def test_a_fifo_is_refused_without_blocking(tmp_path):
  os.mkfifo(tmp_path / "g.json")
  t0 = time.monotonic()
  assert_refused(["show", tmp_path / "g.json"], "file.read", 2, "FIFO")
  stages = tmp_path / "stages"; stages.mkdir()
  write_json(stages / "00_input.json", neg_graph())
  os.mkfifo(stages / "01_rangeify.json")
  assert_refused(["show", stages], "file.read", 2, "FIFO")
  assert time.monotonic() - t0 < 30


def test_a_large_picture_stops_at_its_timeout(tmp_path):
  chain = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}] + [{"op": "NEG", "src": [i]} for i in range(300_000)]
  g = write_json(tmp_path / "chain.json", chain)
  t0 = time.monotonic()
  r = console("show", g, "--limit", "0", "--collapse", "off", "-o", tmp_path / "c.html", "--timeout", "1", timeout=120)
  assert r.returncode == 1 and "[run.timeout]" in r.stderr, r.stdout[-500:] + r.stderr[-2000:]
  assert time.monotonic() - t0 < 30 and not (tmp_path / "c.html").exists()


def test_diagnostics_are_capped_and_text_is_escaped(tmp_path):
  from tinyspec.limits import limits
  bad = tmp_path / "\x1b[2Jbad.json"
  bad.write_text(json.dumps([{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}] + [{"op": "NOPE\x1b[31m"}] * 1000))
  rc, text = cli("show", bad, "-o", tmp_path / "b.svg")
  assert rc == 1 and "\x1b" not in text and "\\x1b[2Jbad.json" in text, text[:2000]
  assert len(text.splitlines()) == limits().max_diagnostics + 1 and "more errors not reported" in text
  rc, text = cli("show", tmp_path / "stages\x1b[2J")   # not there: the folder's name comes back escaped
  assert rc == 2 and "\x1b" not in text, text
