"""spec/graph.schema.json and the hand-written loader (graph.from_document) accept and
reject the same documents: a fixed list covering every keyword of the schema, and random
documents built from the schema's fields with good and bad values."""
from __future__ import annotations
import json
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from tinyspec.graph import from_document
from tinyspec.tables import tables, SchemaValidator

SCHEMA = tables().graph_schema()
VALIDATOR = SchemaValidator(SCHEMA)   # JSON Schema with ECMA-262 patterns, as the tables read it
C = {"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}


def loader_accepts(doc) -> bool:
  g, diags = from_document(doc, "doc")
  return g is not None and not diags


def schema_accepts(doc) -> bool:
  return VALIDATOR.is_valid(doc)


def doc(**top):
  d = {"format": "tinyspec-graph", "version": 1, "nodes": [C]}
  d.update(top)
  return {k: v for k, v in d.items() if v is not ...}


def node(**fields):
  n = {"op": "NEG", "src": [0]}
  n.update(fields)
  return [C, {k: v for k, v in n.items() if v is not ...}]


DOCS = [
  # whole documents
  [C], doc(), doc(format=...), doc(version=...), doc(level="kernel"), doc(roots=[0]), doc(meta={"a": [1]}), doc(roots=[]),
  doc(nodes=[]), doc(nodes=...), doc(nodes={}), doc(nodes="x"), doc(nodes=None), [], "x", 5, None, True, {},
  doc(format="tinyspec"), doc(format=None), doc(version=2), doc(version="1"), doc(version=True), doc(version=1.0),
  doc(level="galaxy"), doc(level=None), doc(level=["tensor"]), doc(roots="0"), doc(roots=[-1]), doc(roots=[True]),
  doc(roots=[1.0]), doc(roots=[0.5]), doc(roots=[None]), doc(meta=[]), doc(meta=None), doc(meta="m"), doc(edges=[]),
  # node fields
  node(), node(src=...), node(arg=None), node(arg=[1, {"x": None}]), node(tag={"any": ["json"]}), node(tag=None),
  node(name="y"), node(name="y" * 128), node(name="y" * 129), node(name=5), node(name=None),
  node(op=...), node(op=5), node(op=None), node(op="neg"), node(op="NEG2_X"), node(op="2NEG"), node(op="N" * 64), node(op="N" * 65),
  node(op="NEG\n"), node(op=""), node(op="NÉG"),
  node(src="0"), node(src=[True]), node(src=[-1]), node(src=[0.0]), node(src=[-0.0]), node(src=[0.5]), node(src=[None]),
  node(src=[[0]]), node(src={"0": 0}), node(src=None), node(src=[10**30]), node(src=[1e20]),
  node(dtype="float32"), node(dtype="not-a-dtype"), node(dtype=["int32", "float32"]), node(dtype=[]), node(dtype=5), node(dtype=[5]),
  node(dtype=None), node(dtype={"a": 1}),
  node(shape=[]), node(shape=[2, 3]), node(shape=[[2], [3, [4]]]), node(shape=[2.0]), node(shape=[-1]), node(shape=[True]),
  node(shape=[None]), node(shape="x"), node(shape=None), node(shape=[{"a": 1}]), node(shape=[2.5]),
  node(extra=1), [C, 5], [C, None], [C, [C]], [C, "NEG"],
]


@pytest.mark.parametrize("d", DOCS, ids=[json.dumps(d)[:60] for d in DOCS])
def test_schema_and_loader_agree_on_fixed_documents(d):
  assert loader_accepts(d) == schema_accepts(d), f"schema says {schema_accepts(d)}, loader says {loader_accepts(d)}"


def test_the_fixed_list_has_both_answers():
  answers = [schema_accepts(d) for d in DOCS]
  assert sum(answers) >= 20 and len(answers) - sum(answers) >= 40


# ------------------------------------------------------------------ random documents
json_values = st.recursive(
  st.none() | st.booleans() | st.integers(-3, 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5)
  | st.sampled_from(["tensor", "kernel", "CONST", "ADD", "float32", "tinyspec-graph", "", "const"]),
  lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(["a", "op", "src", "nodes"]), kids, max_size=3),
  max_leaves=8)
good_int = st.integers(0, 5) | st.sampled_from([0.0, 2.0, 10**20])
node_values = {
  "op": st.sampled_from(["CONST", "ADD", "X_1", "add", "", "A" * 65, "ADD\n"]) | json_values,
  "src": st.lists(good_int, max_size=3) | json_values,
  "arg": json_values,
  "dtype": st.sampled_from(["float32", "int"]) | st.lists(st.text(max_size=3), max_size=2) | json_values,
  "shape": st.lists(good_int | st.lists(good_int, max_size=2), max_size=3) | json_values,
  "tag": json_values,
  "name": st.text(max_size=3) | st.just("n" * 129) | json_values,
  "extra": json_values,
}
nodes_st = st.lists(st.fixed_dictionaries({"op": st.sampled_from(["CONST", "NEG"])},
                                          optional={k: v for k, v in node_values.items() if k != "op"}) |
                    st.dictionaries(st.sampled_from(sorted(node_values)), json_values, max_size=4) | json_values, max_size=4)
doc_values = {
  "format": st.just("tinyspec-graph") | json_values, "version": st.sampled_from([1, 1.0, 2, True]) | json_values,
  "level": st.sampled_from(["tensor", "kernel", "program", "other"]) | json_values,
  "roots": st.lists(good_int, max_size=3) | json_values, "meta": st.dictionaries(st.text(max_size=3), json_values, max_size=2) | json_values,
  "nodes": nodes_st, "edges": json_values,
}
documents = nodes_st | st.fixed_dictionaries({}, optional=doc_values) | json_values


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_schema_and_loader_agree_on_random_documents(d):
  assert loader_accepts(d) == schema_accepts(d), f"schema says {schema_accepts(d)}, loader says {loader_accepts(d)}"
