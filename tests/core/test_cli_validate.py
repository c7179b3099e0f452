"""`tinyspec validate` and `tinyspec props`: the message form, every error reported, --level,
exit codes over several files, and --json reports that match spec/report.schema.json."""
from __future__ import annotations
import json
import re
from pathlib import Path
import jsonschema
from tinyspec.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPORT = jsonschema.Draft202012Validator(json.loads((ROOT / "spec" / "report.schema.json").read_text()))
LINE = re.compile(r"^(?P<file>.+?): (?:node (?P<node>\d+)(?: \((?P<op>[A-Z0-9_?]+)\))?: )?(?P<msg>.+) \[(?P<rule>[\w.]+)\]$")
C = {"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}


def cli(capsys, *argv):
  rc = main([str(a) for a in argv])
  out = capsys.readouterr()
  assert "Traceback" not in out.out + out.err
  return rc, out.out, out.err


def write(tmp_path, name, nodes_or_doc) -> Path:
  p = tmp_path / name
  p.write_text(json.dumps(nodes_or_doc))
  return p


THREE_ERRORS = [C, {"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}},
                {"op": "ADD", "src": [0, 1]},                                             # dtype.match
                {"op": "NEG", "src": [2]},                                                # not blamed: its source is broken
                {"op": "RECIP", "src": [0]},                                              # dtype.allowed
                {"op": "VCONST", "arg": {"values": [6], "dtype": "index"}},
                {"op": "BUFFER", "src": [5], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                {"op": "VCONST", "arg": {"values": [4], "dtype": "index"}},
                {"op": "RESHAPE", "src": [6, 7]},                                         # RESHAPE.numel
                {"op": "SINK", "src": [3, 4, 8]}]


def test_every_error_is_reported_in_the_documented_form(capsys, tmp_path):
  f = write(tmp_path, "three.json", THREE_ERRORS)
  rc, out, _ = cli(capsys, "validate", f)
  assert rc == 1
  lines = out.strip().splitlines()
  parsed = [LINE.match(ln) for ln in lines]
  assert all(parsed), lines
  assert [(m["file"], m["node"], m["op"], m["rule"]) for m in parsed] == [
    (str(f), "2", "ADD", "dtype.match"), (str(f), "4", "RECIP", "dtype.allowed"), (str(f), "8", "RESHAPE", "RESHAPE.numel")]


def test_valid_file_line_and_quiet(capsys, tmp_path):
  f = write(tmp_path, "ok.json", [C, {"op": "NEG", "src": [0]}])
  rc, out, _ = cli(capsys, "validate", f)
  assert rc == 0 and out.strip() == f"{f}: valid (2 nodes, tensor level)"
  rc, out, _ = cli(capsys, "validate", "-q", f)
  assert rc == 0 and out == ""


def test_exit_code_is_the_worst_over_files(capsys, tmp_path):
  ok = write(tmp_path, "ok.json", [C])
  bad = write(tmp_path, "bad.json", THREE_ERRORS)
  missing = tmp_path / "missing.json"
  assert cli(capsys, "validate", ok, ok)[0] == 0
  assert cli(capsys, "validate", ok, bad)[0] == 1
  rc, out, _ = cli(capsys, "validate", missing, bad, ok)
  assert rc == 2 and f"{missing}: cannot read file" in out and f"{ok}: valid" in out and "[RESHAPE.numel]" in out


KERNEL = [{"op": "VCONST", "arg": {"values": [4], "dtype": "index"}}, {"op": "PARAM", "src": [0], "arg": {"slot": 0, "dtype": "float32"}},
          {"op": "CONST", "arg": {"value": 4, "dtype": "index"}}, {"op": "RANGE", "src": [2], "arg": {"id": 0}},
          {"op": "INDEX", "src": [1, 3]}, {"op": "CONST", "arg": {"value": 0.0, "dtype": "float32"}}, {"op": "STORE", "src": [4, 5]},
          {"op": "END", "src": [6, 3]}, {"op": "SINK", "src": [7]}]


def test_level_is_honored(capsys, tmp_path):
  f = write(tmp_path, "k.json", KERNEL)
  rc, out, _ = cli(capsys, "validate", f)
  assert rc == 0 and "kernel level" in out
  rc, out, _ = cli(capsys, "validate", "--level", "kernel", f)
  assert rc == 0
  rc, out, _ = cli(capsys, "validate", "--level", "tensor", f)
  assert rc == 1 and {m["rule"] for m in map(LINE.match, out.splitlines())} == {"level.op"}
  assert "node 3 (RANGE): RANGE may appear at level kernel, program, not in a tensor graph" in out
  assert "node 7 (END)" in out
  rc, out, _ = cli(capsys, "validate", "--level", "program", f)
  assert rc == 0   # every op of this kernel may also appear in a linear program
  # the file's own level is used under auto, and --level overrides it
  g = write(tmp_path, "t.json", {"level": "tensor", "nodes": KERNEL})
  assert cli(capsys, "validate", g)[0] == 1 and cli(capsys, "validate", "--level", "kernel", g)[0] == 0


def test_validate_json_report_matches_its_schema(capsys, tmp_path):
  ok = write(tmp_path, "ok.json", [C])
  bad = write(tmp_path, "bad.json", THREE_ERRORS)
  garbage = tmp_path / "garbage.json"; garbage.write_bytes(b"\x00\xff")
  rc, out, _ = cli(capsys, "validate", "--json", ok, bad, garbage)
  rep = json.loads(out)
  REPORT.validate(rep)
  assert rc == 2 and rep["exit"] == 2 and rep["valid"] is False
  files = {Path(f["file"]).name: f for f in rep["files"]}
  assert files["ok.json"] == {"file": str(ok), "valid": True, "exit": 0, "level": "tensor", "nodes": 1, "untrusted": [], "errors": []}
  assert [(e["node"], e["op"], e["rule"]) for e in files["bad.json"]["errors"]] == [(2, "ADD", "dtype.match"), (4, "RECIP", "dtype.allowed"),
                                                                                    (8, "RESHAPE", "RESHAPE.numel")]
  assert files["garbage.json"]["errors"][0]["rule"] == "file.parse" and files["garbage.json"]["nodes"] is None
  rc, out, _ = cli(capsys, "validate", "--json", ok)
  assert rc == 0 and json.loads(out)["files"][0]["valid"] is True   # one file: the same form


def test_props_text_and_json(capsys, tmp_path):
  f = write(tmp_path, "p.json", [{"op": "VCONST", "arg": {"values": [2, 3], "dtype": "index"}},
                                 {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                                 {"op": "CAST", "src": [1], "arg": "uint8"}, {"op": "RECIP", "src": [1]}])
  rc, out, _ = cli(capsys, "props", f)
  assert rc == 0
  lines = out.splitlines()
  assert lines[1].split() == ["1", "BUFFER", "dtype=float32", "shape=(2,", "3)", "device=CPU", "addrspace=GLOBAL", "min_max=(-inf,", "inf)", "axis=null"]
  assert "min_max=(0, 255)" in lines[2]   # a saturating float->uint8 cast
  rc, out, _ = cli(capsys, "props", "--json", f)
  rep = json.loads(out)
  REPORT.validate(rep)
  assert rep["nodes"][1] == {"node": 1, "op": "BUFFER", "dtype": "float32", "shape": [2, 3], "device": "CPU", "addrspace": "GLOBAL",
                             "min_max": ["-inf", "inf"], "axis": None}
  assert rep["nodes"][0]["min_max"] == [2, 3]


def test_props_of_an_invalid_graph(capsys, tmp_path):
  f = write(tmp_path, "bad.json", THREE_ERRORS)
  rc, out, err = cli(capsys, "props", f)
  assert rc == 1 and "[dtype.match]" in err and "    2 ADD          (invalid)" in out and "    0 CONST" in out
  rc, out, _ = cli(capsys, "props", "--json", f)
  rep = json.loads(out)
  REPORT.validate(rep)
  assert rep["nodes"][2] == {"node": 2, "op": "ADD", "error": True} and rep["nodes"][3] == {"node": 3, "op": "NEG", "error": True}
  assert len(rep["errors"]) == 3
  rc, out, _ = cli(capsys, "props", "--json", tmp_path / "missing.json")
  rep = json.loads(out)
  REPORT.validate(rep)
  assert rc == 2 and rep["nodes"] == [] and rep["errors"][0]["rule"] == "file.read"


def test_tuple_props_in_json(capsys, tmp_path):
  f = write(tmp_path, "t.json", [C, {"op": "CONST", "arg": {"value": 2.0, "dtype": "float32"}}, {"op": "TUPLE", "src": [0, 1]}])
  rc, out, _ = cli(capsys, "props", "--json", f)
  rep = json.loads(out)
  REPORT.validate(rep)
  assert rep["nodes"][2]["dtype"] == ["int32", "float32"] and rep["nodes"][2]["shape"] == [[], []] and rep["nodes"][2]["min_max"] is None
