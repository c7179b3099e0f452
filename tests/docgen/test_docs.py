"""The generated docs: up to date, complete, rendered from any Tables (a YAML-only op is
documented and counted), the LaTeX well formed (always) and compiling (with pdflatex)."""
from __future__ import annotations
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest
import yaml
from tinyspec.tables import Tables, tables
from tinyspec import docgen
from tinyspec.docgen.md import anchor
from tinyspec.docgen.tex import tex, tt
from tinyspec.docgen.texcheck import check_tex
from conftest import tool

gen_docs = tool("gen_docs")

ROOT = Path(__file__).resolve().parents[2]
SPECIALS = r"a_b ^c #d &e %f $g {h} ~i \j <k> |l| ±m →n"

# A new op written only in YAML, with existing rule forms: a family, a check, an example.
# Its texts carry every LaTeX special so escaping is exercised end to end.
NEW_OP = {
  "family": "binary",
  "semantics": "frob(a, b): a test op that exists only in a temporary table; " + SPECIALS,
  "checks": [{"rule": "FROB.shapes", "expr": "src[0].shape == src[1].shape", "msg": "FROB needs equal shapes " + SPECIALS}],
  "example": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}, {"op": "CONST", "arg": {"value": 2, "dtype": "int32"}},
              {"op": "FROB", "src": [0, 1]}],
}


@pytest.fixture(scope="module")
def shipped_docs():
  return docgen.render_all(root=ROOT)


@pytest.fixture(scope="module")
def frob(tmp_path_factory):
  """Tables with FROB added (in a folder with no decompositions.yaml) and its three docs."""
  d = tmp_path_factory.mktemp("frob")
  raw = yaml.safe_load((ROOT / "spec" / "ops.yaml").read_text())
  raw["ops"]["FROB"] = NEW_OP
  (d / "ops.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
  T = Tables(ops_path=d / "ops.yaml")
  return T, {"spec.md": docgen.render_spec_md(T, d), "spec.tex": docgen.render_spec_tex(T), "status.md": docgen.render_status_md(T, d)}


# ------------------------------------------------------------------ up to date, complete
def test_committed_docs_match_the_tables(shipped_docs):
  for name, text in shipped_docs.items():
    assert (ROOT / "docs" / name).read_text(encoding="utf-8") == text, f"docs/{name} is stale: run python tools/gen_docs.py"


def test_check_passes_on_fresh_docs_and_names_a_stale_file(tmp_path, capsys):
  assert gen_docs.main(["--out", str(tmp_path)]) == 0
  assert sorted(p.name for p in tmp_path.iterdir()) == ["protocol.md", "spec.md", "spec.tex", "status.md"]
  assert gen_docs.main(["--check", "--out", str(tmp_path)]) == 0
  (tmp_path / "status.md").write_text((tmp_path / "status.md").read_text() + "edited by hand\n")
  capsys.readouterr()
  assert gen_docs.main(["--check", "--out", str(tmp_path)]) == 1
  out = capsys.readouterr().out
  assert "status.md is stale" in out and "-edited by hand" in out and "spec.md is stale" not in out


def test_every_op_and_rule_id_is_in_spec_md(shipped_docs):
  md = shipped_docs["spec.md"]
  T = tables()
  for name in T.ops:
    assert f'<a id="op-{name.lower()}"></a>\n\n### {name}\n' in md, name
  for rid in T.rule_ids():
    assert f'<a id="rule-{anchor(rid)}"></a>\n\n### {rid}\n' in md, rid
  for k in list(T.decisions) + list(T.conflicts):
    assert f"### {k}\n" in md, k


def test_every_op_is_in_the_tex_and_the_status_matrix(shipped_docs):
  T = tables()
  for name in T.ops:
    assert r"\op{" + tex(name) + "}" in shipped_docs["spec.tex"], name
    assert f"| [{name}](spec.md#op-{name.lower()}) | {T.ops[name].category} | yes |" in shipped_docs["status.md"], name


# ------------------------------------------------------------------ a YAML-only op
def test_a_yaml_only_op_is_documented_in_spec_md(frob):
  T, docs = frob
  md = docs["spec.md"]
  assert "[FROB](#op-frob)" in md and '<a id="op-frob"></a>\n\n### FROB\n' in md
  entry = md.split('<a id="op-frob"></a>')[1].split('<a id="op-')[0]
  assert "`FROB(A, B)`" in entry                                   # signature from the family's slots
  assert "[FROB.shapes](#rule-frob-shapes) (check)" in entry        # its check, numbered first
  assert "`src[0].shape == src[1].shape`" in entry
  assert "`broadcast(*[s.shape for s in src])` | category rule (elementwise)" in entry   # derived from its category
  assert "%2 = FROB(%0, %1)" in entry and "-> int32 ()" in entry    # the example, validated with derived props
  assert '<a id="rule-frob-shapes"></a>' in md and "Applies to: [FROB](#op-frob)." in md


def test_a_yaml_only_op_is_in_the_tex(frob):
  T, docs = frob
  t = docs["spec.tex"]
  assert r"\op{FROB}" in t and tex(NEW_OP["semantics"]) in t and tt("FROB.shapes") in t
  assert check_tex(t) == []


def test_a_yaml_only_op_is_counted_in_the_status_matrix(frob):
  T, docs = frob
  st = docs["status.md"]
  assert f"* ops in the tables: {len(T.ops)}" in st and len(T.ops) == len(tables().ops) + 1
  rows = {ln.split("]")[0][3:]: [c.strip() for c in ln.strip("|").split("|")] for ln in st.splitlines() if ln.startswith("| [")}
  assert rows["FROB"][1:4] == ["elementwise", "yes", "valid"]
  # rules: its own check, plus the derived and structural rules of its family (as ADD, a binary op without checks)
  checks, derived, structural = rows["ADD"][4].split(" + ")
  assert checks == "0" and rows["FROB"][4] == f"1 + {derived} + {structural}"


def test_templates_absent_are_named_not_defined(frob):
  T, docs = frob
  template_ops = [o for o in T.ops.values() if isinstance(o.decomposition, dict) and "template" in o.decomposition]
  assert template_ops, "the shipped table has ops decomposed by named templates"
  for o in template_ops:
    assert f"The template `{o.decomposition['template']}` (not defined in `spec/decompositions.yaml` yet)." in docs["spec.md"]
  assert "`spec/decompositions.yaml` does not exist yet" in docs["spec.md"]


# ------------------------------------------------------------------ LaTeX
def test_shipped_tex_is_well_formed(shipped_docs):
  assert check_tex(shipped_docs["spec.tex"]) == []


def test_tex_escaping_survives_every_special_character():
  doc = "\\documentclass{article}\n\\begin{document}\n%s\n\n%s\n\\end{document}\n"
  assert check_tex(doc % (tex(SPECIALS), tt(SPECIALS))) == []
  assert tex(SPECIALS).isascii() and "[U+263A]" == tex("\u263a")   # unknown symbols become ASCII


@pytest.mark.parametrize("broken, problem", [
  ("x_y", "unescaped '_'"), ("a # b", "unescaped '#'"), ("a & b", "unescaped '&'"), ("{open", "never closed"),
  ("\\foo", "unknown command"), ("$x", "never closed"), ("\u2192", "non-ASCII"), ("~", "unescaped '~'"),
  ("\\begin{itemize}", "\\end{document} closes \\begin{itemize}"), ("\\usepackage{enumitem}", "is not in the known set"),
  ("\\begin{longtable}{l l}a & b & c \\\\\\end{longtable}", "has 3 cells, the column spec has 2"),
])
def test_texcheck_finds(broken, problem):
  doc = "\\documentclass{article}\n\\begin{document}\n" + broken + "\n\\end{document}\n"
  assert any(problem in p for p in check_tex(doc)), check_tex(doc)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed (apt-get install texlive-latex-base texlive-latex-recommended)")
def test_tex_compiles_with_pdflatex(frob, tmp_path):
  (tmp_path / "spec.tex").write_text(frob[1]["spec.tex"])
  r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "spec.tex"], cwd=tmp_path,
                     capture_output=True, text=True, timeout=120)
  errors = [ln for ln in r.stdout.splitlines() if ln.startswith("!")]
  assert r.returncode == 0 and (tmp_path / "spec.pdf").stat().st_size > 10_000, errors or r.stdout[-2000:]


# ------------------------------------------------------------------ status inputs
def _mini_root(tmp_path) -> Path:
  d = tmp_path / "conformance" / "rules" / "PERMUTE.perm"   # the layout of conformance/rules/README.md
  d.mkdir(parents=True)
  for n in ("valid-1", "invalid-1", "invalid-2"):
    (d / f"{n}.json").write_text("[]")
    expect = {"valid": n.startswith("valid")} | ({} if n.startswith("valid") else {"rule": "PERMUTE.perm", "exit": 1, "node": 0})
    (d / f"{n}.expect.json").write_text(json.dumps({"rule": "PERMUTE.perm", "input": f"{n}.json", "expect": expect}))
  (tmp_path / "conformance" / "cases").mkdir(parents=True)
  (tmp_path / "conformance" / "cases" / "a.json").write_text(json.dumps({"meta": {"ops": ["ADD", "MUL"]}, "nodes": [{"op": "CONST"}]}))
  (tmp_path / "conformance" / "cases" / "b.json").write_text(json.dumps([{"op": "CONST"}, {"op": "ADD", "src": [0, 0]}]))
  return tmp_path


def test_status_counts_corpus_files(tmp_path):
  st = docgen.render_status_md(tables(), _mini_root(tmp_path))
  rows = {ln.split("]")[0][3:]: [c.strip() for c in ln.strip("|").split("|")] for ln in st.splitlines() if ln.startswith("| [")}
  assert rows["ADD"][-2] == "2" and rows["MUL"][-2] == "1" and rows["CONST"][-2] == "1"   # meta.ops wins over nodes
  assert rows["PERMUTE"][-1] == "3" and rows["FLIP"][-1] == "0" and rows["ADD"][-1] == "—"
  md = docgen.render_spec_md(tables(), tmp_path)
  assert "Invalid cases: `conformance/rules/PERMUTE.perm/invalid-1.json`, `conformance/rules/PERMUTE.perm/invalid-2.json`" in md
  assert "Valid cases: `conformance/rules/PERMUTE.perm/valid-1.json`" in md


def test_status_renders_conformance_results(tmp_path):
  T = tables()
  assert "`docs/conformance-results.json` is absent" in docgen.render_status_md(T, tmp_path)
  (tmp_path / "docs").mkdir()
  res = {"reference": {"ADD": {"float32": "passed", "int8": "failed"}, "SIN": {"float16": "xfail", "int32": "unsupported"}}}
  (tmp_path / "docs" / "conformance-results.json").write_text(json.dumps(res))
  st = docgen.render_status_md(T, tmp_path)
  sec = st.split("## Conformance coverage per backend")[1]
  assert "### reference" in sec and "1 passed, 0 portable, 1 failed, 1 xfail, 1 unsupported. Profile: meets **neither** profile." in sec
  assert "| op | int8 | int32 | float16 | float32 |" in sec          # dtypes in dtypes.yaml order
  assert "| ADD | FAIL |  |  | pass |" in sec and "| SIN |  | — | xfail |  |" in sec
  res = {"tinygrad-CPU": {"ADD": {"float32": "passed", "int8": "portable"}, "SIN": {"float16": "xfail"}}, "c": {"ADD": {"float32": "passed"}}}
  (tmp_path / "docs" / "conformance-results.json").write_text(json.dumps(res))
  sec = docgen.render_status_md(T, tmp_path).split("## Conformance coverage per backend")[1]
  c, tg = sec.split("### tinygrad-CPU")
  assert "Profile: meets **portable** except the expected failures of its manifest." in tg and "Profile: meets **strict**" in c
  assert "| ADD | port |  | pass |" in tg
  (tmp_path / "docs" / "conformance-results.json").write_text(json.dumps({"reference": {"ADD": {"float32": "great"}}}))
  assert "does not have the form" in docgen.render_status_md(T, tmp_path)


def _render_in_a_fresh_process(block_optional: bool, seed: str) -> dict:
  block = "import sys; sys.modules['tinygrad'] = None; sys.modules['pyopencl'] = None\n" if block_optional else ""
  code = block + f"import json; from tinyspec import docgen; print(json.dumps(docgen.render_all(root={str(ROOT)!r})))"
  env = {**os.environ, "PYTHONHASHSEED": seed}
  r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  return {"docs": json.loads(r.stdout), "stderr": r.stderr}


def test_output_does_not_depend_on_optional_packages_or_hash_seed():
  """tinygrad and pyopencl made unimportable, another hash seed: the same docs.

  Both renders run in fresh processes, one right after the other. (Comparing with the
  module's in-process render instead made this test flaky in full parallel runs: that
  render happens when the module starts, often a minute earlier, and status.md reads
  refimpl.supported_ops() and compiler.supported_ops() from the working tree, which
  changes under a shared checkout in the meantime; a fresh process saw the newer code.)"""
  plain = _render_in_a_fresh_process(False, "0")
  blocked = _render_in_a_fresh_process(True, "12345")
  for name, text in plain["docs"].items():
    assert blocked["docs"][name] == text, f"{name} differs without tinygrad/pyopencl or with another hash seed\n" \
                                          f"{plain['stderr'][-1000:]}\n{blocked['stderr'][-1000:]}"


def test_cross_references_in_the_tables_resolve():
  """Links the docs make: `(decision X)` in semantics, an op's `conflicts:`, decisions' ops."""
  import re
  T = tables()
  for op in T.ops.values():
    for m in re.finditer(r"\bdecisions? ([a-z0-9-]+(?:, [a-z0-9-]+)*)", op.semantics):
      for k in m.group(1).split(", "):
        assert k in T.decisions, f"{op.name}: semantics cites decision {k!r}, which `decisions:` lacks"
    for k in op.conflicts: assert k in T.conflicts, f"{op.name}: conflict {k!r} is not in `conflicts:`"
  for k, d in T.decisions.items():
    for o in d.get("ops", ()): assert o in T.ops, f"decision {k} names unknown op {o}"
