"""Where IDIV's meaning lives (docs/architecture.md "Changing an op: where IDIV's meaning
lives"): every place the table there names has a check that holds it to floor division,
and IDIV's meaning changed in that one place (to C's truncating division, or a narrower
decision) fails the check. The table and PLACES name the same places, so a ninth place, or
a place without a check, fails here."""
from __future__ import annotations
import math
import re
from pathlib import Path
import numpy as np
import pytest
from tinyspec.tables import Tables, tables
from tinyspec.refimpl.alu import alu
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.registry import UNITS
from tinyspec.validate import validate
from tinyspec import intervals, portable
from tinyspec.compiler import compile_graph
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.render import cases
from tinyspec.compiler.analysis import symbolic
from tinyspec.interop.tinygrad_map import mapping

ROOT = Path(__file__).resolve().parents[2]
MIN = -(1 << 31)
A, B = (x.ravel().astype(np.int32) for x in np.meshgrid(np.arange(-9, 10), np.arange(-3, 4)))
A, B = np.append(A, MIN).astype(np.int32), np.append(B, -1).astype(np.int32)


def floor_div(a: int, b: int) -> int:
  """The spec's IDIV, stated here: floor(a/b); a/0 = 0; MIN/-1 wraps to MIN (decision idiv-mod)."""
  if b == 0: return 0
  if a == MIN and b == -1: return MIN
  return a // b


def trunc_div(a: int, b: int) -> int:
  return 0 if b == 0 else MIN if (a == MIN and b == -1) else int(math.trunc(a / b))


FLOOR = np.array([floor_div(int(a), int(b)) for a, b in zip(A, B)], np.int32)
TRUNC = np.array([trunc_div(int(a), int(b)) for a, b in zip(A, B)], np.int32)


# ------------------------------------------------------------------ the checks, one per place
def check_decision():
  """ops.yaml decision idiv-mod: any result where B == 0 or MIN/-1, the canonical one elsewhere."""
  bounds, _, _ = portable.alternatives("IDIV", None, "int32", [A, B], FLOOR, 0)
  assert np.array_equal(np.isinf(bounds), (B == 0) | ((A == MIN) & (B == -1)))


def check_reference():
  assert np.array_equal(alu("IDIV", "int32", A, B), FLOOR)


def check_interval():
  """Every quotient of operands in [alo, ahi] x [blo, bhi] (blo >= 1) lies in iv_idiv's interval."""
  for alo, ahi, blo, bhi in ((-9, 9, 1, 3), (-9, -1, 2, 3), (-5, 7, 3, 3)):
    lo, hi = intervals.iv_idiv((alo, ahi), (blo, bhi), "int32")
    got = [floor_div(a, b) for a in range(alo, ahi + 1) for b in range(blo, bhi + 1)]
    assert lo <= min(got) and max(got) <= hi, ((alo, ahi, blo, bhi), (lo, hi))


def check_derived(T: Tables | None = None):
  """The validator's min_max of IDIV (spec/derived.yaml names iv_idiv) holds every quotient."""
  b = Builder()
  x = b.add("PARAM", b.shape(), b.const(-9, "index"), b.const(9, "index"), arg={"slot": 0, "dtype": "index"})
  y = b.add("PARAM", b.shape(), b.const(1, "index"), b.const(3, "index"), arg={"slot": 1, "dtype": "index"})
  q = b.IDIV(x, y)
  lo, hi = validate(b.graph(), tables=T or tables()).views[q].min_max
  assert lo <= -9 and hi >= 9, (lo, hi)


def check_compiled():
  """The C kernel of IDIV over buffers (every sign: `/` is not proved plain) gives the
  reference's values (divisors that C's own / traps on, 0 and MIN/-1, left out: a plant
  that renders `/` would end the process there)."""
  ok = (B != 0) & ~((A == MIN) & (B == -1))
  a, d = A[ok], B[ok]
  b = Builder()
  b.IDIV(b.buffer((len(a),), "int32", 0), b.buffer((len(d),), "int32", 1))
  got = compile_graph(b.graph(), "c", keep_stages=False).run({"buf0": a, "buf1": d})["out0"]
  assert np.array_equal(got, FLOOR[ok])


def check_symbolic():
  """The index rules that hold for floor division (div_split, div_div) keep every value."""
  from test_compiler_rewrites import RULE_NAMES, check_rule
  for name in ("div_split", "div_div"):
    for dt in ("int8", "int32"):
      for seed in range(2): check_rule(RULE_NAMES.index(name), dt, seed)


def _template(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """interop/tinygrad_map.yaml template `name` over A and B (int32), evaluated step by step with the reference's units."""
  env = {"A": (a, "int32"), "B": (b, "int32")}
  out = None
  for st in mapping()["templates"][name]["steps"]:
    srcs = [env[s] if isinstance(s, str) else (np.int32(s["const"]), None) for s in st["src"]]
    dts = tuple(d or next(d2 for _, d2 in srcs if d2) for _, d in srcs)
    od = tables().ops[st["op"]]
    dt = st["arg"].replace("$dtype", "int32") if st["op"] == "CAST" else "bool" if od.category in ("compare",) or dts[0] == "bool" else dts[0]
    out = (alu(st["op"], dt, *[v for v, _ in srcs], src_dtypes=dts), dt)
    if "as" in st: env[st["as"]] = out
  return out[0]


def check_map():
  """tinygrad's FLOORDIV is IDIV; its CDIV (truncating) is IDIV where both operands are non-negative, else template cdiv."""
  M = mapping()["ops"]
  assert M["FLOORDIV"].get("op") == "IDIV" and "template" not in M["FLOORDIV"]
  assert M["CDIV"]["op"] == "IDIV" and M["CDIV"]["form"] == "trunc_div"
  assert np.array_equal(_template(M["CDIV"]["template"], A, B), TRUNC)


# ------------------------------------------------------------------ the plants: IDIV changed in one place
def plant_decision(monkeypatch):
  d = dict(tables().decisions["idiv-mod"])
  d["allowed"] = [{**d["allowed"][0], "where": "B == 0"}]   # MIN/-1 no longer any value
  monkeypatch.setitem(tables().decisions, "idiv-mod", d)
  portable._all_entries.cache_clear()


def plant_reference(monkeypatch):
  real = UNITS["IDIV"]
  def truncating(ctx, a, b):
    q = real.fn(ctx, a, b)
    return np.where((q < 0) & (q * b != a), q + 1, q)
  monkeypatch.setitem(UNITS, "IDIV", type(real)(**{**real.__dict__, "fn": truncating}))


def plant_interval(monkeypatch):
  def iv_trunc(a, b, name):
    if a is None or b is None or b[0] < 1: return intervals.dtype_range(name)
    c = [int(math.trunc(x / y)) for x in a for y in b]
    return min(c), max(c)
  monkeypatch.setattr(intervals, "iv_idiv", iv_trunc)


def plant_derived(monkeypatch, tmp_path):
  text = (ROOT / "spec" / "derived.yaml").read_text()
  old = "  - ops: [IDIV]\n    min_max: \"iv_idiv(src[0].min_max, src[1].min_max, dtype)\""
  assert old in text
  (tmp_path / "derived.yaml").write_text(text.replace(old, "  - ops: [IDIV]\n    min_max: \"iv_const(0, dtype)\""))   # IDIV is 0
  return Tables(derived_path=tmp_path / "derived.yaml")


def plant_render(monkeypatch):
  rows = [dict(c) for c in render_tables()["ops"]["IDIV"]]
  for c in rows:
    if "uses" in c and "idiv" in c["uses"]: c["code"], c["uses"] = "({a} / {b})", []   # C's truncating /
  monkeypatch.setitem(render_tables()["ops"], "IDIV", rows)
  monkeypatch.setattr(cases, "_CASES", {})   # (the cases chosen per dtype, cached)


def plant_predicate(monkeypatch):
  monkeypatch.setitem(cases.PREDICATES, "div_plain", lambda u: True)   # C's / taken for every sign


def plant_symbolic(monkeypatch):
  """div_split believing C's truncation: a remainder in (-c, c) divides to 0 (true of
  truncation, not of floor division: -1 // 3 is -1)."""
  import inspect
  import textwrap
  src = textwrap.dedent(inspect.getsource(symbolic.div_split))
  assert "if 0 <= lo and hi < cv:" in src
  env = dict(vars(symbolic))
  exec(src.replace("if 0 <= lo and hi < cv:", "if -cv < lo and hi < cv:"), env)   # noqa: S102 (the module's own source, one condition changed)
  rules = [type(r)(r.name, r.pat, env["div_split"]) if r.name == "div_split" else r for r in symbolic.RULES.rules]
  monkeypatch.setattr(symbolic.RULES, "rules", rules)
  monkeypatch.setattr(symbolic.RULES, "by_op", {})


def plant_map(monkeypatch):
  monkeypatch.setitem(mapping()["ops"], "FLOORDIV", {"op": "IDIV", "form": "trunc_div", "template": "cdiv"})


PLACES = {   # docs/architecture.md's table, in its order: (file, plant, check)
  "spec/ops.yaml": (plant_decision, check_decision),
  "refimpl/ops/elementwise.py": (plant_reference, check_reference),
  "tinyspec/intervals.py": (plant_interval, check_interval),
  "spec/derived.yaml": (plant_derived, check_derived),
  "spec/render.yaml": (plant_render, check_compiled),
  "compiler/render/cases.py": (plant_predicate, check_compiled),
  "compiler/analysis/symbolic.py": (plant_symbolic, check_symbolic),
  "interop/tinygrad_map.yaml": (plant_map, check_map),
}


def test_the_docs_name_exactly_these_places():
  text = (ROOT / "docs" / "architecture.md").read_text()
  section = text[text.index("## Changing an op: where IDIV's meaning lives"):]
  section = section[:section.index("\n## ", 5)]
  rows = re.findall(r"^\| (\d+) \| `([^`]+)`", section, re.M)
  assert [f for _, f in rows] == list(PLACES) and [int(n) for n, _ in rows] == list(range(1, len(PLACES) + 1))


@pytest.mark.parametrize("place", list(PLACES))
def test_each_place_holds_floor_division(place):
  PLACES[place][1]()


@pytest.mark.parametrize("place", list(PLACES))
def test_idiv_changed_in_one_place_fails_its_check(place, monkeypatch, tmp_path):
  plant, check = PLACES[place]
  planted = plant(monkeypatch, tmp_path) if plant is plant_derived else plant(monkeypatch)
  with pytest.raises(AssertionError):
    check(planted) if plant is plant_derived else check()
  portable._all_entries.cache_clear()
