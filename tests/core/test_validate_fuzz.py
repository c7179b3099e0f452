"""Mutated corpus graphs never crash the validator: it raises nothing, never reports
internal.error (a bug in the tables), reports only catalogue rule ids, and no op check
fails by raising (a check that crashes on a graph an earlier rule let through is a bug in
the check's expression)."""
from __future__ import annotations
import copy
import json
from hypothesis import given, settings, strategies as st, HealthCheck
from tinyspec.graph import from_document
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.conformance.corpus.rulecases import load_rule_cases

T = tables()
GRAPHS = []
for c in load_rule_cases():
  if c.valid and c.input.suffix == ".json":
    d = json.loads(c.input.read_text())
    GRAPHS.append(d["nodes"] if isinstance(d, dict) else d)
ARGS = [n.get("arg") for g in GRAPHS for n in g]
DTYPES = ["bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "bfloat16", "float32", "float64", "index"]


def mutate(rnd, g):
  g = copy.deepcopy(g)
  for _ in range(rnd.randint(1, 3)):
    i = rnd.randrange(len(g)); n = g[i]
    r = rnd.random()
    if r < 0.3 and n.get("src") and i > 0: n["src"][rnd.randrange(len(n["src"]))] = rnd.randrange(i)   # rewire a source
    elif r < 0.5: n["arg"] = copy.deepcopy(rnd.choice(ARGS))                                            # another node's arg
    elif r < 0.65 and isinstance(n.get("arg"), dict) and "dtype" in n["arg"]: n["arg"]["dtype"] = rnd.choice(DTYPES)
    elif r < 0.75 and isinstance(n.get("arg"), dict) and "values" in n["arg"]:
      n["arg"]["values"] = [rnd.choice([0, 1, 2, 3, -1, 7, 2**40]) for _ in range(rnd.randint(0, 4))]
    elif r < 0.9 and i > 0: n["src"] = n.get("src", []) + [rnd.randrange(i)]                              # one source more
    else: n["op"] = rnd.choice(list(T.ops))                                                              # another op
  return g


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([None, "tensor", "kernel", "program"]))
def test_mutated_graphs_get_clean_diagnostics(rnd, level):
  doc = {"nodes": mutate(rnd, rnd.choice(GRAPHS))}
  if level: doc["level"] = level
  g, diags = from_document(doc)
  assert g is not None and not diags
  res = validate(g)
  for d in res.diagnostics:
    assert d.rule in T.rule_catalogue, d.format()
    assert "Error:" not in d.message, d.format()
