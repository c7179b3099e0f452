"""docs/spec.tex: the tables in the layout of the Dialect draft (spec/sources.yaml) (booktabs tables per category,
a color per category, op names in small caps, the AxisType and OptOps tables, the
derived-property table), rendered from the tables.

All text goes through `tex()` (or `tt()` for code), which escapes LaTeX's special
characters and maps the few non-ASCII symbols the tables use; the output is pure ASCII.
docgen/texcheck.py checks the result's structure; tests/docgen/test_docs.py compiles it when
pdflatex is installed.
"""
from __future__ import annotations
import re
from functools import lru_cache
from pathlib import Path
import yaml
from tinyspec.docgen import model as M

STYLE = Path(__file__).resolve().parent / "style.yaml"

# Packages the document uses (all in Debian's texlive-latex-base + texlive-latex-recommended).
PACKAGES = [("geometry", "margin=0.75in"), ("amsmath", None), ("amssymb", None), ("array", None), ("booktabs", None),
            ("longtable", None), ("xcolor", "dvipsnames")]

_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "%": r"\%", "#": r"\#", "&": r"\&",
            "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "$": r"\$", "<": r"\textless{}", ">": r"\textgreater{}",
            "|": r"\textbar{}"}
_UNICODE = {"±": r"$\pm$", "→": r"$\rightarrow$", "←": r"$\leftarrow$", "≤": r"$\le$", "≥": r"$\ge$", "≠": r"$\ne$",
            "⌊": r"$\lfloor$", "⌋": r"$\rfloor$", "⌈": r"$\lceil$", "⌉": r"$\rceil$", "—": "---", "–": "--",
            "×": r"$\times$", "·": r"$\cdot$", "…": r"\ldots{}", "∞": r"$\infty$", "’": "'", "‘": "`", "“": "``",
            "”": "''", "√": r"$\surd$", "∈": r"$\in$", "≈": r"$\approx$", "⊕": r"$\oplus$", "λ": r"$\lambda$",
            "π": r"$\pi$", "¬": r"$\neg$", "∧": r"$\wedge$", "∨": r"$\vee$"}
_TEXT_ONLY = {'"': "''"}   # OT1 text fonts have no straight double quote; typewriter fonts do


def tex(s) -> str:
  """Plain text for LaTeX: specials escaped, known symbols mapped, any other non-ASCII
  character written as [U+XXXX] so the document always compiles."""
  return "".join(_char(c, False) for c in str(s))


_BREAK_AFTER = set("_.-([/")


def tt(s) -> str:
  """Code in typewriter type; lines may break after _ . - ( [ / (long ids, expressions)."""
  return r"\texttt{" + "".join(_char(c, True) + (r"\allowbreak{}" if c in _BREAK_AFTER else "") for c in str(s)) + "}"


def _char(c: str, code: bool) -> str:
  if c in _SPECIAL: return _SPECIAL[c]
  if not code and c in _TEXT_ONLY: return _TEXT_ONLY[c]
  if c == "\n": return " "
  if ord(c) < 128: return c
  return _UNICODE.get(c, f"[U+{ord(c):04X}]")


def op(name: str) -> str:
  return r"\op{" + tex(name) + "}"


_OP_CALL = re.compile(r"\b([A-Z][A-Z0-9_]*)(?=[({])")


def formula(text: str) -> str:
  """A decomposition formula: op names in small caps, the rest typewriter-free text."""
  out, pos = [], 0
  for m in _OP_CALL.finditer(text):
    out.append(tex(text[pos:m.start()])); out.append(op(m.group(1))); pos = m.end()
  return "".join(out) + tex(text[pos:])


@lru_cache(maxsize=None)
def _style() -> dict:
  with open(STYLE) as f: return yaml.safe_load(f) or {}


def _color_name(kind: str, key: str) -> str:
  return kind + re.sub(r"[^A-Za-z]", "", key.title())   # letters only: safe in \color{}


def _colors(T) -> dict[str, str]:
  """color name -> HTML hex for every category and AxisType the style gives a color."""
  st = _style()
  out = {}
  for cat in T.categories:
    if cat in (st.get("category_colors") or {}): out[_color_name("cat", cat)] = str(st["category_colors"][cat])
  for ax in T.axis_types:
    if ax in (st.get("axis_colors") or {}): out[_color_name("ax", ax)] = str(st["axis_colors"][ax])
  return out


def colored(kind: str, key: str, body: str, colors: dict) -> str:
  name = _color_name(kind, key)
  return r"{\color{" + name + "}" + body + "}" if name in colors else body


def _p(width: str) -> str:
  return r">{\raggedright\arraybackslash}p{" + width + "}"


def longtable(cols: str, head: list[str], rows: list[list[str]], size: str = r"\footnotesize") -> list[str]:
  out = ["{" + size, r"\begin{longtable}{@{}" + cols + "@{}}", r"\toprule",
         " & ".join(r"\textbf{" + h + "}" for h in head) + r" \\", r"\midrule", r"\endhead", r"\bottomrule", r"\endfoot"]
  out += [" & ".join(r) + r" \\" for r in rows]
  out += [r"\end{longtable}}"]
  return out


def levels_short(T, op_) -> str:
  return "".join(lv[0].upper() for lv in op_.levels)


def _arg(T, op_) -> str:
  t = M.arg_text(T, op_)
  return "---" if t is None else tt(t)


def _src(op_) -> str:
  return tex(op_.arity_text()).replace("...", r"\ldots{}")


# ------------------------------------------------------------------ sections
def _preamble(T) -> list[str]:
  out = [r"\documentclass[10pt,letterpaper]{article}"]
  for name, opt in PACKAGES: out.append(r"\usepackage" + (f"[{opt}]" if opt else "") + "{" + name + "}")
  out += [r"\newcommand{\op}[1]{\textsc{\MakeLowercase{#1}}}"]
  out += [r"\definecolor{" + n + "}{HTML}{" + h + "}" for n, h in _colors(T).items()]
  out += [r"\setlength{\LTpre}{4pt}", r"\setlength{\LTpost}{4pt}",
          r"\title{tinyspec: the UOp IR specification}",
          r"\author{Generated from the tables in \texttt{spec/} by \texttt{tools/gen\_docs.py}}",
          r"\date{}", r"\begin{document}", r"\maketitle", r"\thispagestyle{empty}"]
  return out


def _intro(T) -> list[str]:
  props = T.derived.get("properties", {})
  out = [r"\section*{UOps}",
         r"All nodes of a tinygrad program are \textbf{UOps}. A UOp is a tuple $(\mathrm{op},\;\mathrm{src},\;\mathrm{arg},\;\mathrm{tag})$ "
         r"where $\mathrm{op}$ is from the tables below, $\mathrm{src}$ is a tuple of source UOps, $\mathrm{arg}$ is op-dependent "
         r"(a JSON value with a JSON Schema per op) and $\mathrm{tag}$ is for temporary processing. The full program is a DAG of UOps. "
         f"Each UOp has {len(props)} derived properties --- " + ", ".join(r"\textbf{" + tex(p) + "}" for p in props)
         + r" --- determined by the rules at the end of this document. Levels: "
         + "; ".join(r"\textbf{" + tex(k) + "} (" + tex(k[0].upper()) + "): " + tex(v) for k, v in T.levels.items()) + ".", ""]
  rows = [[tt(d["name"]), tex(d["class"]), str(d["itemsize"]), tex(M.fmt_value(d["min"])), tex(M.fmt_value(d["max"])), tt(d["c"]), tt(d["cl"])]
          for d in M.dtype_rows()]
  out += [r"\subsection*{dtypes}"] + longtable("l l r r r l l", ["dtype", "class", "bytes", "min", "max", "C", "OpenCL C"], rows)
  out += [r"\noindent Groups: " + "; ".join(r"\textbf{" + tex(k) + "}: " + tex(", ".join(v)) for k, v in M.dtype_groups().items())
          + r". In the arg column, \texttt{\$name} is a named type:", ""]
  out += longtable("l " + _p("15.0cm"), ["Named type", "Schema"], [[tt("$" + n), tt(t)] for n, t in M.named_arg_types(T)])
  return out


def _category(T, cat, info, ops, colors) -> list[str]:
  """One table per category: an arg column if any op has an arg, a decomposition column
  if any op has a decomposition; the semantics column takes the remaining width."""
  title = colored("cat", cat, tex(info.get("title", cat)), colors)
  note = info.get("note")
  out = [r"\subsection*{" + title + (r" \normalfont\small--- " + tex(note) if note else "") + "}"]
  has_arg = any(o.arg_schema != {"type": "null"} for o in ops)
  has_dec = any(o.decomposition is not None for o in ops)
  cols = [("Op", "3.0cm", lambda o: op(o.name)), ("src", "2.0cm", _src)]
  if has_arg: cols.append(("arg", "3.0cm" if has_dec else "3.6cm", lambda o: _arg(T, o)))
  if has_dec: cols.append(("Decomposition", "3.0cm" if has_arg else "3.8cm", lambda o: _decomposition(T, o)))
  used = sum(float(w[:-2]) for _, w, _ in cols) + 0.6 + 0.42 * (len(cols) + 1)
  spec = " ".join(_p(w) for _, w, _ in cols) + " l " + _p(f"{17.6 - used:.1f}cm")
  rows = [[f(o) for _, _, f in cols] + [levels_short(T, o), tex(o.semantics) + _rules_note(o)] for o in ops]
  return out + longtable(spec, [h for h, _, _ in cols] + ["Lv", "Semantics"], rows)


def _decomposition(T, o) -> str:
  d = M.decomposition(T, o)
  if d is None: return "---"
  if d.template: return "template " + tt(d.template) + (": " + tex(d.summary) if d.summary else "")
  return r"\newline ".join(formula(f) for f in d.formulas)


def _rules_note(o) -> str:
  ids = M.check_rule_ids(o)
  return (r"\newline{\scriptsize checks: " + ", ".join(tt(r) for r in ids) + "}") if ids else ""


def _derived(T) -> list[str]:
  out = [r"\subsection*{Derived Properties}",
         "Every UOp has " + ", ".join(r"\textbf{" + tex(p) + "}" for p in T.derived.get("properties", {}))
         + r", derived from its op, src and arg. For each property the first rule naming the op applies, else the first naming "
           r"its category, else the default. $[a,A]$, $[b,B]$ are the min\_max of $\mathrm{src}[0]$, $\mathrm{src}[1]$.", ""]
  notes = []
  for prop in T.derived.get("properties", {}):
    groups: dict[tuple, list[str]] = {}
    for o in T.ops.values():
      r = next(r for r in M.derived_rules(T, o) if r.prop == prop)
      groups.setdefault((r.expr, r.where), []).append(o.name)
      notes += [(o.name, w) for w in r.why]
    rows = [[tt(expr), tex(where), ", ".join(op(n) for n in names)] for (expr, where), names in groups.items()]
    out += [r"\paragraph{" + tex(prop) + "} " + tex(T.derived["properties"][prop])]
    out += longtable(_p("6.6cm") + " " + _p("2.6cm") + " " + _p("7.6cm"), ["Rule", "From", "Ops"], rows)
  seen, items = set(), []
  for name, why in notes:
    if (name, why) in seen: continue
    seen.add((name, why)); items.append(r"\item " + op(name) + ": " + tex(why))
  if items: out += [r"\paragraph{Notes}", r"\begin{itemize}", *items, r"\end{itemize}"]
  soundness = T.derived.get("soundness")
  if soundness: out += [r"\paragraph{Soundness} " + tex(" ".join(str(soundness).split())), ""]
  return out


def _functions(T) -> list[str]:
  fns = T.derived.get("functions") or {}
  rows = [[tt(k), tex(v)] for k, v in fns.items()]
  return [r"\subsection*{The Rule Language}",
          r"Rules are restricted Python expressions (names, literals, attribute and item access, arithmetic, comparisons, "
          r"boolean logic, conditionals, comprehensions) calling only these functions:", ""] + longtable(_p("3.0cm") + " " + _p("14.0cm"), ["Function", "What it does"], rows)


def _templates(T) -> list[str]:
  tpl = {k: v for k, v in M.templates(T).items() if isinstance(v, dict)}
  if not tpl: return []
  rows = [[tt(k), tex(M.template_summary(t))] for k, t in tpl.items()]
  return [r"\subsection*{Decomposition Templates \normalfont\small--- named step lists in \texttt{spec/decompositions.yaml}}"] + \
    longtable(_p("2.8cm") + " " + _p("14.2cm"), ["Template", "Summary"], rows)


def _decisions(T) -> list[str]:
  rows = [[tt(k), ", ".join(op(o) for o in d.get("ops", ())), tex(d.get("rule", "")) + (r"\newline{\scriptsize\itshape " + tex(d["why"]) + "}" if d.get("why") else "")]
          for k, d in T.decisions.items()]
  return [r"\subsection*{Decisions \normalfont\small--- where the source documents are vague}"] + \
    longtable(_p("2.6cm") + " " + _p("3.2cm") + " " + _p("10.9cm"), ["Decision", "Ops", "Rule"], rows)


def _tolerances(T) -> list[str]:
  """Wrapping columns that share the text width (7in less the gaps between columns): the
  op, then each tolerance key (M.tolerance_columns) as prose (M.tolerance_text)."""
  cols = M.tolerance_columns(T)
  wide = {"domain", "decomposed_domain"}
  gaps = 2 * len(cols) * 6 / 72.27 * 2.54                       # cm between columns (\tabcolsep 6pt each side)
  free = 17.78 - 1.5 - gaps                                     # cm for the tolerance columns, after the op's 1.5cm
  weight = {k: 1.5 if k in wide else 1.0 for k, _ in cols}         # expressions get more room than numbers
  units = sum(weight.values()) or 1
  spec = _p("1.5cm") + "".join(" " + _p(f"{free * weight[k] / units - 0.05:.2f}cm") for k, _ in cols)
  rows = [[op(n) if n in T.ops else tt(n)] + [tex(M.tolerance_text(t.get(k, ""))) if isinstance(t, dict) else "" for k, _ in cols]
          for n, t in T.tolerances.items()]
  return [r"\subsection*{Tolerances \normalfont\small--- in ulp of the result dtype}"] + longtable(spec, ["Op"] + [tex(t) for _, t in cols], rows)


def _catalogue(T) -> list[str]:
  by_rule = M.ops_for_rule(T)
  n = len(T.ops)
  rows = []
  for rid in sorted(T.rule_ids(), key=lambda r: (list(T.rule_catalogue).index(r) if r in T.rule_catalogue else 10**6, r)):
    ops = by_rule.get(rid, [])
    where = "all ops" if len(ops) == n else (f"{len(ops)} ops" if len(ops) > 8 else ", ".join(op(o) for o in ops) or "---")
    rows.append([tt(rid), tex(M.rule_kind(T, rid)), tex(M.rule_text(T, rid)), where])
  return [r"\subsection*{Rule Catalogue \normalfont\small--- every rule id a graph can break}"] + \
    longtable(_p("3.4cm") + " l " + _p("8.2cm") + " " + _p("3.2cm"), ["Rule", "Kind", "Description", "Applies to"], rows)


def _axis_opt(T, colors) -> list[str]:
  def split(v):
    froms = v.get("split_from") or []
    letters = [T.axis_types.get(f, {}).get("letter", f) for f in froms]
    return tex(", ".join(letters)) if letters else "---"
  rows = []
  for k, v in T.axis_types.items():
    d = v.get("direction")
    direction = "---" if d is None else tex("/".join(d) if isinstance(d, list) else d)
    if v.get("created_by"): direction += " (created by " + op(v["created_by"]) + ")"
    rows.append([colored("ax", k, tt(k), colors), tt(v.get("letter", "")), split(v), direction, tex(v.get("semantics", ""))])
  out = [r"\subsection*{Kernel Optimizations (OptOps) \normalfont\small--- schedule-level transforms on kernel ranges}",
         r"Each kernel's iteration space is a set of \op{Range} axes. Every range has an \textbf{AxisType}:", ""]
  out += longtable("l l l " + _p("3.4cm") + " " + _p("8.0cm"), ["AxisType", "Letter", "Split from", "Direction", "Semantics"], rows)
  rows = [[op(k), tex(v.get("axis") or "---"), tex(v.get("arg") or "---"), tex(v.get("semantics", "")) + (" Must be first." if v.get("must_be_first") else "")]
          for k, v in T.opt_ops.items()]
  out += [r"An optimization is a triple $(\mathrm{op},\;\mathrm{axis},\;\mathrm{arg})$; optimizations compose left to right.", ""]
  out += longtable("l " + _p("2.2cm") + " " + _p("3.2cm") + " " + _p("9.4cm"), ["OptOp", "axis", "arg", "Semantics"], rows)
  out += [r"\subsection*{Reduce ops \normalfont\small--- what \op{Reduce}'s arg op means}", ""]
  out += longtable("l l " + _p("6.4cm") + " " + _p("5.4cm"), ["Reduce op", "Fold", "Identity (empty reduction)", "May reorder"],
                   [[tt(k), op(f), tex(i), tex(r)] for k, f, i, r in M.reduce_op_rows(T)])
  return out


def _conflicts(T) -> list[str]:
  def earlier(c): return c["seed002"] if "seed002" in c else "; ".join(f"({M.source_name(T, k)}) {v}" for k, v in c.items() if k.startswith("seed") and k != "seed001")
  rows = [[tt(k), tex(c.get("seed001", "")), tex(earlier(c)), tex(c.get("decision", ""))] for k, c in T.conflicts.items()]
  others = [k for c in T.conflicts.values() for k in c if k.startswith("seed") and k not in ("seed001", "seed002")]
  also = "".join(f" (or {M.source_name(T, k)})" for k in dict.fromkeys(others))
  return [r"\subsection*{Conflicts Between the Source Documents \normalfont\small--- " + tex(M.source_name(T, "seed001")) + " (newest) wins unless stated}"] + \
    longtable(_p("2.6cm") + " " + _p("4.4cm") + " " + _p("4.4cm") + " " + _p("5.0cm"),
              ["Conflict", tex(M.source_name(T, "seed001", True)), tex(M.source_name(T, "seed002", True) + also), "Decision"], rows)


def _sources(T) -> list[str]:
  rows = [[tex(M.source_name(T, s.id, True)) + r" \newline " + tt(s.id), r"\emph{" + tex(s.title) + "}", tex(s.what)] for s in M.sources(T).values()]
  return [r"\subsection*{Sources \normalfont\small--- the documents the spec was written from (not shipped; cited by id in the tables)}"] + \
    longtable(_p("3.2cm") + " " + _p("4.6cm") + " " + _p("8.7cm"), ["Source", "Title", "What it is"], rows)


def _graph_format(T) -> list[str]:
  schema = T.graph_schema()
  defs = schema.get("$defs", {})
  rows, parts = [], ("document", "node")   # the defs tabulated here print by name
  for part in parts:
    d = defs.get(part, {})
    req = set(d.get("required", ()))
    rows += [[tex(part), tt(k), tt(M.schema_text(v, defs, frozenset(parts))), "yes" if k in req else ""] for k, v in d.get("properties", {}).items()]
  return [r"\subsection*{Graph File Format}", tex(schema.get("description", "")) + " JSON (or plain YAML loaded safely), described by "
          + tt("spec/graph.schema.json") + ": a document or just the node list; the roots default to the last node.", ""] + \
    longtable("l l " + _p("10.5cm") + " l", ["Part", "Field", "Schema", "Required"], rows)


def render_spec_tex(T) -> str:
  """docs/spec.tex for the tables T."""
  colors = _colors(T)
  out = _preamble(T) + _intro(T)
  for cat, info, ops in M.ops_by_category(T):
    if ops: out += ["%% " + "=" * 60] + _category(T, cat, info, ops, colors)
  for part in (_templates(T), _derived(T), _decisions(T), _tolerances(T), _catalogue(T), _axis_opt(T, colors), _conflicts(T), _sources(T), _functions(T), _graph_format(T)):
    out += ["%% " + "=" * 60] + part
  out += [r"\end{document}"]
  return "\n".join(out) + "\n"
