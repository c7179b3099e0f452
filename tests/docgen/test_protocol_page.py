"""The protocol page (docs/protocol.md, `tinyspec docs`) is rendered from the schema the runner
checks messages against (issue 32): every message and key is on it with its type and
default, the worked session is of the schema's form and computes what the reference does,
and a key added to the schema is on the page and accepted by the runner alike."""
from __future__ import annotations
import copy
import json
import numpy as np
import pytest
from tinyspec.conformance.run import inline, protocol
from tinyspec.docgen import render_all
from tinyspec.docgen.protocol import render_protocol_md
from tinyspec.tables import tables


@pytest.fixture(scope="module")
def page() -> str:
  return render_protocol_md(tables())


def test_the_page_names_every_message_and_key_with_its_default(page):
  S = protocol.schema()
  for m in S["x-messages"]: assert f"### {m['name']}" in page
  for name, node in S["$defs"].items():
    for key, sub in node.get("properties", {}).items():
      assert f"| `{key}` |" in page, (name, key)
      if "default" in sub: assert f"`{json.dumps(sub['default'])}`" in page, (name, key)
  assert "| `validates` | boolean | `true` |" in page and "### inline-array" in page and "bit pattern" in page
  assert "protocol.md" in render_all()   # `tinyspec docs` writes it


def test_the_worked_session_is_of_the_schemas_form_and_right():
  """Each line validates as the message it stands for; the run answers are what the
  reference computes on the run's inputs (bit for bit), the refusal a refusal."""
  from tinyspec.graph import from_document
  from tinyspec.refimpl import evaluate
  S = protocol.schema()
  session = S["x-session"]
  expect = iter(["hello", "hello_answer", "run", "run_answer", "run", "run_answer", "quit"])
  for (_who, msg), kind in zip(session, expect):
    assert protocol.problem(msg, kind) is None, (kind, protocol.problem(msg, kind))
  run, answer = session[2][1], session[3][1]
  ins = {k: inline.decode(v) for k, v in run["inputs"].items()}
  g, _ = from_document({"nodes": [{"op": "VCONST", "arg": {"values": [3], "dtype": "index"}},
                                     {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
                                     {"op": "BUFFER", "src": [0], "arg": {"slot": 1, "dtype": "float32", "device": "CPU"}},
                                     {"op": "ADD", "src": [1, 2]}]})
  want = evaluate(g, ins)["out0"]
  assert inline.decode(answer["outputs"]["out0"]).tobytes() == np.asarray(want).tobytes()


def test_a_key_added_to_the_schema_is_on_the_page_and_accepted(monkeypatch):
  S = copy.deepcopy(protocol.schema())
  S["$defs"]["capabilities"]["properties"]["streams"] = {"type": "integer", "default": 1, "description": "Runs it may take at once."}
  monkeypatch.setattr(protocol, "schema", lambda: S)
  protocol._validator.cache_clear()
  try:
    page = render_protocol_md(tables())
    assert "| `streams` | integer | `1` | Runs it may take at once. |" in page
    assert protocol.problem({"ok": True, "capabilities": {"streams": 2}}, "hello_answer") is None
    assert "unknown key 'stream'; did you mean 'streams'?" in protocol.problem({"ok": True, "capabilities": {"stream": 2}}, "hello_answer")
  finally: protocol._validator.cache_clear()
