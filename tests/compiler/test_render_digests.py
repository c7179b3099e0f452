"""tools/render_digests.py (the byte-identical check of rendered sources) sees a change of
one graph's rendered source, and only that one."""
from __future__ import annotations
import sys
from pathlib import Path
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import render_digests   # noqa: E402


@pytest.fixture(scope="module")
def few_graphs():
  graphs = [g for g in render_digests.corpus_graphs() if g[0].startswith(("case/ADD/float32", "case/REDUCE/float32"))]
  assert len(graphs) >= 2
  return graphs


def test_same_sources_same_digests(few_graphs):
  a = render_digests.render_all(None, few_graphs)
  assert set(a) == {"c", "opencl", "h100"} and all(len(v) == len(few_graphs) for v in a.values())
  assert render_digests.differences(a, render_digests.render_all(None, few_graphs)) == []


def test_a_planted_change_in_one_graph_is_reported(few_graphs, monkeypatch):
  from tinyspec.compiler import pipeline
  want = render_digests.render_all(None, few_graphs)
  plain = pipeline._render.assemble
  def planted(sources, target):   # one byte more in the sources of the graphs with a reduce
    text = plain(sources, target)
    return text + " " if "acc" in text else text
  monkeypatch.setattr(pipeline._render, "assemble", planted)
  diff = render_digests.differences(want, render_digests.render_all(None, few_graphs))
  assert diff and all("REDUCE" in d for d in diff), diff
