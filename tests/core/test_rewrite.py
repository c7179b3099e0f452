"""The rewrite engine (tinyspec/rewrite.py): patterns, the context, the fixed point, the
modes (once, top-down, entered sources), the trace, and substitute/rebuild on top of it."""
from __future__ import annotations
import pytest
from tinyspec.uop import UOp, toposort
from tinyspec.rewrite import Pat, Rule, RuleSet, RewriteLimit, Trace, graph_rewrite, rebuild, substitute, tracing


def c(v, dt="int32"): return UOp("CONST", (), {"value": v, "dtype": dt})
def add(a, b): return UOp("ADD", (a, b))
def mul(a, b): return UOp("MUL", (a, b))


X = UOp("DEFINE_VAR", (), {"name": "x"})


def _fold_add(a, b): return c(a.arg["value"] + b.arg["value"])
def _add_zero(x, z): return x if z.arg["value"] == 0 else None


FOLD = RuleSet([Rule("fold_add", Pat("ADD", (Pat.cvar("a"), Pat.cvar("b"))), _fold_add),
                Rule("add_zero", Pat("ADD", (Pat.var("x"), Pat.cvar("z")), commutative=True), _add_zero)], "fold")


def test_a_pattern_binds_sources_and_a_repeated_name_must_be_the_same_node():
  same = Pat("ADD", (Pat.var("a"), Pat.var("a")))
  assert same.match(add(X, X), {}) and not same.match(add(X, c(1)), {})
  b: dict = {}
  assert Pat("ADD", (Pat.var("x"), Pat.cvar("k")), name="s").match(add(X, c(2)), b) and b["x"] is X and b["k"] is c(2)
  assert not Pat("MUL").match(add(X, X), {}) and Pat(("ADD", "MUL")).match(mul(X, X), {})


def test_commutative_patterns_try_both_orders():
  b: dict = {}
  assert FOLD["add_zero"].pat.match(add(c(0), X), b) and b["x"] is X


def test_rewrite_reaches_a_fixed_point_bottom_up():
  g = add(add(c(1), c(2)), add(c(3), c(0)))     # (1+2) + (3+0) -> 3 + 3 -> 6
  assert graph_rewrite(g, FOLD) is c(6)
  assert graph_rewrite(add(add(X, c(0)), c(0)), FOLD) is X


def test_once_applies_each_rule_once_per_node():
  double = RuleSet([Rule("wrap", Pat("CONST", name="x"), lambda x: add(x, x) if x.arg["value"] < 4 else None)])
  assert graph_rewrite(c(1), double, once=True) is add(c(1), c(1))
  with pytest.raises(RewriteLimit):   # the same rule to a fixed point never stops: the limit says so
    graph_rewrite(c(1), RuleSet([Rule("grow", Pat("CONST", name="x"), lambda x: add(x, c(0)))]) + RuleSet([]), limit=1000)


def test_the_context_reaches_rules_that_ask_for_it():
  rules = RuleSet([Rule("scale", Pat("CONST", name="x"), lambda x, ctx: c(x.arg["value"] * ctx) if x.arg["value"] < 10 else None)])
  assert graph_rewrite(add(c(2), c(3)), rules, ctx=5, once=True) is add(c(10), c(15))


def test_top_down_hits_are_final_and_not_entered():
  inner = add(X, c(1))
  g = mul(inner, add(inner, c(2)))
  mapping = {inner: c(7), c(7): c(8)}
  assert substitute(g, mapping) is mul(c(7), add(c(7), c(2)))      # the replacement is not rewritten again
  assert substitute(g, {X: c(9)}, stop=lambda u: u.op == "ADD" and u.src[1] is c(2)) is mul(add(c(9), c(1)), add(inner, c(2)))


def test_enter_keeps_sources_as_they_are():
  g = mul(add(c(1), c(2)), add(c(3), c(4)))
  assert graph_rewrite(g, FOLD, enter=lambda u, k: k == 0) is mul(c(3), add(c(3), c(4)))


def test_rebuild_composes_replacements_bottom_up():
  def bump(u): return c(u.arg["value"] + 1) if u.op == "CONST" else None
  assert rebuild(add(c(1), c(2)), bump) is add(c(2), c(3))


def test_the_trace_counts_each_rule_per_stage():
  with tracing() as t:
    t.stage = "one"
    graph_rewrite(add(add(c(1), c(2)), add(c(3), c(0))), FOLD)     # three folds: 1+2, 3+0, 3+3
    t.stage = "two"
    substitute(X, {X: c(1)})                     # a substitution's mapping is not a rule that fires
    graph_rewrite(add(X, c(0)), FOLD)
  assert t.times("fold_add") == 3 and t.times("add_zero", "one") == 0 and t.times("add_zero", "two") == 1
  assert set(t.by_stage()) == {"one", "two"} and "substitute" not in t.by_stage()["two"]
  outer = Trace()
  with tracing(outer), tracing() as inner:
    graph_rewrite(add(c(1), c(2)), FOLD)
  assert inner.times("fold_add") == 1 and outer.times("fold_add") == 0


def test_rule_sets_refuse_duplicate_names_and_unnamed_functions():
  with pytest.raises(ValueError, match="twice"):
    RuleSet([FOLD["fold_add"], FOLD["fold_add"]])
  with pytest.raises(ValueError, match="lambda"):
    RuleSet.named([(Pat("ADD"), lambda: None)])
  assert [r.name for r in RuleSet.named([(Pat("ADD", (Pat.var("x"), Pat.cvar("z"))), _add_zero)]).rules] == ["_add_zero"]


def test_deep_graphs_need_no_recursion():
  g = X
  for _k in range(20_000): g = add(g, c(0))
  assert graph_rewrite(g, FOLD) is X
  assert len(toposort(g)) == 20_002


def test_a_rebuilt_node_equal_to_an_original_one_is_still_substituted():
  """{a: b, b: c}: INDEX(a) becomes INDEX(b), the same node as the graph's own INDEX(b),
  which must still become INDEX(c) (a substitution is no fixed point)."""
  a, b, d = (UOp("DEFINE_VAR", (), {"name": n}) for n in "abd")
  g = UOp("SINK", (UOp("INDEX", (a,)), UOp("INDEX", (b,))))
  assert substitute(g, {a: b, b: d}) is UOp("SINK", (UOp("INDEX", (b,)), UOp("INDEX", (d,))))
  assert rebuild(g, lambda u: {a: b, b: d}.get(u)) is UOp("SINK", (UOp("INDEX", (b,)), UOp("INDEX", (d,))))


def test_top_down_without_once_rewrites_a_hit_again_then_its_sources():
  def double(x, two): return add(x, x) if two.arg["value"] == 2 else None
  rules = RuleSet([Rule("double", Pat("MUL", (Pat.var("x"), Pat.cvar("two"))), double)])
  g = mul(mul(X, c(2)), c(2))
  assert graph_rewrite(g, rules, top_down=True) is add(add(X, X), add(X, X))
  assert graph_rewrite(g, rules, top_down=True, once=True) is add(mul(X, c(2)), mul(X, c(2)))


def test_a_rule_may_ask_for_another_nodes_rewritten_form():
  """A result built from several nodes (reductions sharing one loop): `rewrite` gives any
  node's form in the same rewrite, each node rewritten once; a rule that comes back to the
  node it runs for is refused, not a recursion."""
  y = UOp("DEFINE_VAR", (), {"name": "y"})
  def pair(v, ctx, rewrite): return UOp("GROUP", (v, rewrite(ctx[v]))) if v in ctx else None
  rules = FOLD + RuleSet([Rule("pair", Pat("DEFINE_VAR", name="v"), pair)])
  with tracing() as t:
    out = graph_rewrite(UOp("SINK", (X, add(y, c(0)))), rules, ctx={X: add(y, c(0))}, once=True)
  assert out is UOp("SINK", (UOp("GROUP", (X, y)), y)) and t.times("pair") == 1 and t.times("add_zero") == 1
  with pytest.raises(RewriteLimit, match="asked for it"):
    graph_rewrite(UOp("SINK", (X,)), rules, ctx={X: add(y, c(0)), y: add(X, c(0))}, once=True)
