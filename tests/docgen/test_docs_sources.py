"""The spec names its sources (issue 16): the generated docs and the tables' prose cite no
"seed" documents; spec/sources.yaml names each (title, what it is), the docs list them in a
Sources section, and every id the tables cite (a decision's basis, a conflict's columns)
is one of them."""
from __future__ import annotations
import re
from pathlib import Path
import yaml
from tinyspec import docgen
from tinyspec.docgen.model import sources, source_name
from tinyspec.tables import tables

ROOT = Path(__file__).resolve().parents[2]
SEED_PROSE = re.compile(r"\bseeds?\b(?! ?0\d\d\b)|\bseed ?0\d\d\b", re.I)   # "the seed's", "seed 001", "seed001" in text


def _strings(v):
  if isinstance(v, dict):
    for k, x in v.items(): yield from ((f"{k}.{p}", s) for p, s in _strings(x))
  elif isinstance(v, list):
    for i, x in enumerate(v): yield from ((f"{i}.{p}", s) for p, s in _strings(x))
  elif isinstance(v, str): yield "", v


def test_table_prose_cites_sources_by_name():
  for f in sorted((ROOT / "spec").glob("*.yaml")):
    if f.name == "sources.yaml": continue
    for path, s in _strings(yaml.safe_load(f.read_text())):
      if re.fullmatch(r"seed0\d\d", s): continue            # an id (basis: seed001), resolved by spec/sources.yaml
      assert not SEED_PROSE.search(s), f"{f.name} {path}: {s[:120]}"


def test_every_cited_id_is_a_source():
  T = tables()
  known = set(sources(T))
  assert {"seed001", "seed002", "seed004"} <= known
  cited = {d["basis"] for d in T.decisions.values() if str(d.get("basis", "")).startswith("seed")}
  cited |= {k for c in T.conflicts.values() for k in c if k.startswith("seed")}
  assert cited and cited <= known
  assert source_name(T, "seed001") == "the Dialect document" and source_name(T, "seed004", True) == "The UOp summary"


def test_generated_docs_name_the_sources():
  T = tables()
  md, tex = docgen.render_spec_md(T, None), docgen.render_spec_tex(T)
  sec = md[md.index("## Sources"):md.index("## The rule language")]
  tsec = tex[tex.index(r"\subsection*{Sources"):]
  tsec = tsec[:tsec.index("%% ===")]
  for s in sources(T).values():
    assert s.title in sec and f"`{s.id}`" in sec
    assert f"\\texttt{{{s.id[:4]}" in tsec
  for text in (md.replace(sec, ""), tex.replace(tsec, ""), (ROOT / "docs" / "tinygrad-divergences.md").read_text()):
    hits = [m.group(0) for m in SEED_PROSE.finditer(text)]
    assert not hits, hits[:5]
  assert "* [Sources](#sources)" in md


SEED_COMMENT = re.compile(r"\bseed 0\d\d\b|\bthe seed('s)?\b", re.I)   # prose naming a source by its id; `seed001` (an id) is fine
NAMED_SOURCES = ("tinyspec", "refimpl", "compiler", "conformance", "interop", "show", "docgen", "spec")


def test_code_comments_cite_sources_by_name():
  """Comments and docstrings name a source document ("the Dialect document"), as the
  generated docs do, never "seed 001" or "the seed"."""
  assert SEED_COMMENT.search("(seed 001's pipeline)") and SEED_COMMENT.search("the seed's gemm")
  assert not SEED_COMMENT.search("basis: seed001") and not SEED_COMMENT.search("what the seeds are computed from")
  hits = [f"{f.relative_to(ROOT)}:{k}: {line.strip()[:100]}"
          for folder in NAMED_SOURCES for f in sorted((ROOT / folder).rglob("*")) if f.suffix in (".py", ".yaml")
          for k, line in enumerate(f.read_text().splitlines(), 1) if SEED_COMMENT.search(line)]
  assert hits == [], "\n".join(hits[:20])
