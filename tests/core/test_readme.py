"""The README's Python snippets run as written (every ```python block, in order, in one
namespace) and save the graph they say they save."""
from __future__ import annotations
import re
from pathlib import Path
import numpy as np
from hostile import cli
from tinyspec.graph import Graph

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
  return re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)


def test_the_readme_python_snippets_run_and_save_the_whole_gemm_graph(tmp_path, monkeypatch, capsys):
  blocks = python_blocks()
  assert blocks and any("gemm.json" in b for b in blocks)
  monkeypatch.chdir(tmp_path)
  scope: dict = {"__name__": "readme"}
  for code in blocks: exec(compile(code, str(README), "exec"), scope)   # noqa: S102 -- our own README
  g = Graph.load(tmp_path / "gemm.json")
  ops = [n.op for n in g.nodes]
  assert len(ops) == 12 and ops.count("BUFFER") == 2 and {"MUL", "REDUCE"} <= set(ops), ops   # not the realized 2-node graph
  want = np.arange(6, dtype=np.float32).reshape(2, 3) @ np.ones((3, 4), np.float32)
  assert np.array_equal(scope["c"].numpy(), want)
  # the command its comment gives evaluates the saved graph on the saved inputs
  rc, text = cli("eval", tmp_path / "gemm.json", "--input", tmp_path / "gemm-in.npz", "--out", tmp_path / "o")
  assert rc == 0, text
  assert np.array_equal(np.load(tmp_path / "o" / "out0.npy"), want)
