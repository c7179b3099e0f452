"""Nothing is written outside the place the user gave (issue 13, "files written outside
the output directory"): names that become file names are identifiers, refused with a rule
id otherwise; output folders that cannot be made are a clear error; files are written by
rename, so a planted link is replaced and never followed."""
from __future__ import annotations
import json
import numpy as np
import pytest
from hostile import cli, assert_refused, store_graph, neg_graph, write_json, files_under, FAKE, kernel_nodes

ESCAPES = ["../../escaped", "/ABS/escaped", "a/../../escaped", "..", "x\n"]


@pytest.mark.parametrize("name", ESCAPES, ids=["dotdot", "absolute", "inner-dotdot", "parent", "newline"])
@pytest.mark.parametrize("cmd", [["eval"], ["run", "--backend", "ref"], ["run", "--backend", "c"]], ids=["eval", "run-ref", "run-c"])
def test_a_buffer_name_is_an_identifier_and_nothing_leaves_the_out_dir(tmp_path, name, cmd):
  name = name.replace("/ABS", str(tmp_path))
  out = tmp_path / "a" / "b"
  out.mkdir(parents=True)
  g = write_json(tmp_path / "g.json", store_graph(name))
  before = files_under(tmp_path)
  assert_refused([*cmd[:1], g, *cmd[1:], "--out", out], "arg.schema", 1, "node 1 (BUFFER)", "does not match")
  assert files_under(tmp_path) == before   # nothing written anywhere
  assert_refused(["validate", g], "arg.schema", 1)


def test_an_identifier_name_is_the_output_file_name(tmp_path):
  g = write_json(tmp_path / "g.json", store_graph("weights_1"))
  rc, text = cli("eval", g, "--zeros", "--out", tmp_path / "o")
  assert rc == 0 and (tmp_path / "o" / "weights_1.npy").is_file(), text


def test_a_backend_output_name_is_sanitized_in_the_worker(tmp_path):
  """The conformance worker writes what a backend returns: a hostile output name is refused (path.name)."""
  from tinyspec.conformance.run.worker import handle_run
  class Evil:
    def run(self, g, inputs): return {"../../escaped": np.zeros(2, np.float32)}
  g = write_json(tmp_path / "g.json", neg_graph())
  out = tmp_path / "run"; out.mkdir()
  ans = handle_run(Evil(), {"id": "x", "graph": str(g), "out_dir": str(out), "inputs": {}})
  assert ans["ok"] is False and ans["rule"] == "path.name", ans
  assert files_under(tmp_path) == {"g.json", "run"}


@pytest.mark.parametrize("msg", [{"id": "x"}, {"id": "x", "graph": 5, "out_dir": "/tmp"}, {"id": "x", "graph": "G", "out_dir": "/tmp", "inputs": ["a"]},
                                 {"id": "x", "graph": "G", "out_dir": "/tmp", "inputs": {"buf0": "/dev/zero"}}], ids=["empty", "graph-number", "inputs-list", "device"])
def test_a_malformed_run_request_is_an_answer_not_a_crash(tmp_path, msg):
  from tinyspec.conformance.run.worker import handle_run
  msg = {k: (str(write_json(tmp_path / "g.json", neg_graph())) if v == "G" else v) for k, v in msg.items()}
  ans = handle_run(object(), msg)
  assert ans["ok"] is False and "error" in ans


@pytest.mark.parametrize("name,ok", [("out0", True), ("out0.1", True), ("03_rangeify.k0", True), ("starter-python", True), ("buf_7", True),
                                     ("..", False), (".", False), ("", False), (".hidden", False), ("-rf", False), ("a/b", False),
                                     ("/abs", False), ("a\nb", False), ("x" * 129, False), ("é", False), (None, False), ("a..b", False)])
def test_file_names(tmp_path, name, ok):
  from tinyspec.files import check_name, output_path, FileRefused
  if ok:
    assert output_path(tmp_path, name, ".npy").parent == tmp_path
  else:
    with pytest.raises(FileRefused) as e: check_name(name)
    assert e.value.rule == "path.name" and e.value.exit_code == 1


def test_a_planted_link_in_the_out_dir_is_replaced_not_followed(tmp_path):
  victim = tmp_path / "victim.txt"
  victim.write_text("keep me")
  out = tmp_path / "out"; out.mkdir()
  (out / "out0.npy").symlink_to(victim)
  g = write_json(tmp_path / "g.json", neg_graph())
  rc, text = cli("eval", g, "--zeros", "--out", out)
  assert rc == 0, text
  assert victim.read_text() == "keep me" and not (out / "out0.npy").is_symlink()
  assert np.load(out / "out0.npy").shape == (2,)
  from tinyspec.files import save_npy
  save_npy(out, "out0", np.ones(3))   # the writer itself, too
  assert victim.read_text() == "keep me"


@pytest.mark.parametrize("argv", [["eval", "{g}", "--zeros", "--out", "/proc/nope"], ["eval", "{g}", "--zeros", "--out", "/proc/nope/x.npz"],
                                  ["run", "{g}", "--out", "/proc/nope"], ["run", "{g}", "--backend", "c", "--out", "/proc/nope"],
                                  ["compile", "{g}", "--dump-stages", "/proc/nope"], ["eval", "{g}", "--zeros", "--out", "{file}"]],
                         ids=["eval", "eval-npz", "run", "run-c", "dump-stages", "out-is-a-file"])
def test_an_output_folder_that_cannot_be_made_is_a_clear_error(tmp_path, argv):
  g = write_json(tmp_path / "g.json", neg_graph())
  f = tmp_path / "file"; f.write_text("x")
  assert_refused([a.format(g=g, file=f) for a in argv], "path.write", 2, "cannot")


def test_a_cmd_backend_cannot_name_its_way_to_another_manifest(tmp_path):
  """A cmd: backend's self-reported name picks its manifest: `../..` is refused (backend.protocol)."""
  for name in ["../../../etc/passwd", "a/b", "..", "x\n"]:
    assert_refused(["conformance", "--backend", f"cmd:python {FAKE} name {json.dumps(name)}", "-k", "NEG/float32"], "backend.protocol", 2,
                   "is not a plain file name")


def test_manifest_names_are_checked_before_any_path_is_made():
  from tinyspec.conformance.corpus.manifest import load_manifest, ManifestError
  with pytest.raises(ManifestError, match="path.name"): load_manifest("../../etc/passwd")


def test_kernel_params_named_by_slot_write_inside(tmp_path):
  """A kernel-level graph's outputs (PARAMs stored to) are written by their input names."""
  g = write_json(tmp_path / "k.json", kernel_nodes())
  rc, text = cli("eval", g, "--out", tmp_path / "o")
  assert rc == 0 and files_under(tmp_path / "o") == {"param0.npy"}, text


def test_docs_are_written_inside_out_by_rename(tmp_path):
  """tinyspec docs: a planted link in --out is replaced, not followed; a FIFO there does not
  block --check; an --out that cannot be made is path.write, exit 2."""
  import os
  victim = tmp_path / "victim.txt"; victim.write_text("keep me")
  out = tmp_path / "docs"; out.mkdir()
  (out / "spec.md").symlink_to(victim)
  os.mkfifo(out / "status.md")
  rc, text = cli("docs", "--out", out, "--check")
  assert rc == 1 and "status.md" in text and "FIFO" in text, text
  rc, text = cli("docs", "--out", out)
  assert rc == 0 and victim.read_text() == "keep me" and not (out / "spec.md").is_symlink(), text
  assert sorted(p.name for p in out.iterdir()) == ["protocol.md", "spec.md", "spec.tex", "status.md"] and (out / "status.md").is_file()
  assert cli("docs", "--out", out, "--check")[0] == 0
  assert_refused(["docs", "--out", "/proc/nope"], "path.write", 2, "cannot create")


def test_imported_graph_files_have_sanitized_names(tmp_path):
  """import-tinygrad writes NAME.json, NAME.inputs.npz, NAME.OUTPUT.npy: a buffer name that
  is not a plain file name is refused (path.name), nothing lands outside --out."""
  from tinyspec.files import FileRefused
  from tinyspec.graph import Graph
  from tinyspec.interop.script import GraphResult, ScriptResult
  from tinyspec.interop.tinygrad_import import ImportReport
  g = Graph.loads(json.dumps(neg_graph()))
  ok = GraphResult("r0.tensor", "tensor", g, ImportReport(), inputs={"buf0": np.ones(2, np.float32)}, expected={"out0": -np.ones(2, np.float32)})
  ScriptResult("s.py", [ok]).write(tmp_path / "o")
  assert files_under(tmp_path / "o") == {"r0.tensor.json", "r0.tensor.inputs.npz", "r0.tensor.out0.npy", "import-report.json"}
  for bad in (GraphResult("r0.tensor", "tensor", g, ImportReport(), expected={"../../escaped": np.ones(2)}),
              GraphResult("../escaped", "tensor", g, ImportReport())):
    with pytest.raises(FileRefused) as e: ScriptResult("s.py", [bad]).write(tmp_path / "p" / "q")
    assert e.value.rule == "path.name"
  unread = GraphResult("r0.tensor", "tensor", g, ImportReport(), inputs={"buf0": np.ones(2, np.float32), "../escaped": np.ones(2)})
  assert set(unread.inputs) == {"buf0"}   # an input the graph does not read is not kept, so never written
  ScriptResult("s.py", [unread]).write(tmp_path / "r")
  assert not list(tmp_path.rglob("escaped*"))


def test_import_to_an_unwritable_out_is_a_clear_error(tmp_path):
  pytest.importorskip("tinygrad")
  script = tmp_path / "s.py"; script.write_text("x = 1\n")
  assert_refused(["import-tinygrad", script, "--out", "/proc/nope"], "path.write", 2, "cannot create")
