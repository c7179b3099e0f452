"""A structural check of a LaTeX document, in pure Python (no TeX installation needed).

It catches what an unescaped table string or a renderer bug would break, with a line
number: unbalanced braces or math, \\begin without its \\end (or mismatched), packages
outside the known set (the ones CI can install), unknown commands (a stray backslash in
text becomes one), LaTeX specials in text (_ ^ outside math, # outside the preamble,
& outside a table, ~), more cells in a table row than the column spec has, and
non-ASCII characters.

  python -m tinyspec.docgen.texcheck docs/spec.tex     # prints the problems; exit 1 if any
"""
from __future__ import annotations
import re
import sys

# Packages of Debian's texlive-latex-base + texlive-latex-recommended that may be used.
KNOWN_PACKAGES = {"geometry", "amsmath", "amssymb", "array", "booktabs", "longtable", "xcolor", "listings", "textcomp"}
TABLE_ENVS = {"tabular", "longtable", "array"}
KNOWN_ENVS = TABLE_ENVS | {"document", "itemize", "enumerate", "description", "center", "lstlisting"}
# Commands the generated document may use (besides those it defines with \newcommand).
KNOWN_COMMANDS = set("""
documentclass usepackage newcommand definecolor setlength title author date begin end maketitle thispagestyle
section subsection subsubsection paragraph noindent item textbf textit texttt textsc emph normalfont small
footnotesize scriptsize tiny large itshape ttfamily bfseries color MakeLowercase raggedright arraybackslash
toprule midrule bottomrule cmidrule endhead endfoot endfirsthead endlastfoot multicolumn newline allowbreak
smallskip medskip bigskip par ldots textbackslash textasciitilde textasciicircum textless textgreater textbar
textquotesingle mathrm mathbf mathit pm rightarrow leftarrow le ge ne lfloor rfloor lceil rceil times cdot infty
surd in approx oplus lambda pi neg wedge vee LTpre LTpost textwidth linewidth hline
""".split())

_CTRL_WORD = re.compile(r"\\([A-Za-z]+)")


class _Doc:
  def __init__(self, text: str):
    self.text, self.problems = text, []
    self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

  def line(self, pos: int) -> int:
    lo, hi = 0, len(self.line_starts) - 1
    while lo < hi:
      mid = (lo + hi + 1) // 2
      if self.line_starts[mid] <= pos: lo = mid
      else: hi = mid - 1
    return lo + 1

  def bad(self, pos: int, msg: str):
    self.problems.append(f"line {self.line(pos)}: {msg}")

  def group(self, pos: int) -> tuple[str | None, int]:
    """The brace group starting at pos (after spaces): its content and the end position."""
    t = self.text
    while pos < len(t) and t[pos] in " \t": pos += 1
    if pos >= len(t) or t[pos] != "{": return None, pos
    depth, i = 0, pos
    while i < len(t):
      c = t[i]
      if c == "\\": i += 2; continue
      if c == "{": depth += 1
      elif c == "}":
        depth -= 1
        if depth == 0: return t[pos + 1:i], i + 1
      i += 1
    return None, pos

  def optional(self, pos: int) -> int:
    """Skip an optional [...] argument at pos."""
    t = self.text
    if pos < len(t) and t[pos] == "[":
      end = t.find("]", pos)
      return end + 1 if end >= 0 else pos
    return pos


def _columns(spec: str) -> int | None:
  """Number of columns in a tabular column spec (None if it cannot be parsed)."""
  s, out, i = spec, 0, 0
  while i < len(s):
    c = s[i]
    if c in " |": i += 1; continue
    if c in "@<>!":
      j, depth = i + 1, 0
      while j < len(s):
        if s[j] == "{": depth += 1
        elif s[j] == "}":
          depth -= 1
          if depth == 0: break
        j += 1
      i = j + 1; continue
    if c in "lcr": out += 1; i += 1; continue
    if c in "pmb":
      j = s.find("}", i)
      if j < 0: return None
      out += 1; i = j + 1; continue
    return None
  return out


def check_tex(text: str) -> list[str]:
  """The problems found in a LaTeX document (empty when it looks well formed)."""
  d = _Doc(text)
  t = text
  defined: set[str] = set()
  braces: list[int] = []
  envs: list[tuple[str, int, int | None, int]] = []   # name, position, columns, brace depth inside
  cells = 0
  math_at: int | None = None
  in_preamble = True
  i = 0
  while i < len(t):
    c = t[i]
    if c == "%":                                   # comment to end of line
      j = t.find("\n", i); i = len(t) if j < 0 else j; continue
    if c == "\\":
      m = _CTRL_WORD.match(t, i)
      if not m:                                    # control symbol: \{ \_ \\ \% ...
        sym = t[i + 1:i + 2]
        if sym == "\\" and envs and envs[-1][0] in TABLE_ENVS and len(braces) == envs[-1][3]:
          cols = envs[-1][2]
          if cols is not None and cells > cols - 1: d.bad(i, f"a row of {envs[-1][0]} has {cells + 1} cells, the column spec has {cols}")
          cells = 0
        i += 2; continue
      name, j = m.group(1), m.end()
      if name == "newcommand":
        body, _ = d.group(j)
        if body and body.startswith("\\"): defined.add(body[1:])
      elif name == "usepackage": _check_usepackage(d, i, j, in_preamble)
      elif name in ("begin", "end"):
        env, k = d.group(j)
        if env is None: d.bad(i, f"\\{name} without an environment name")
        elif env not in KNOWN_ENVS: d.bad(i, f"unknown environment {env!r}")
        if name == "begin" and env is not None:
          cols = None
          if env in TABLE_ENVS:             # read the column spec and skip past it
            spec, k = d.group(k)
            cols = _columns(spec or "")
            if cols is None: d.bad(i, f"cannot read the column spec {spec!r}")
          if env == "document": in_preamble = False
          envs.append((env, i, cols, len(braces))); cells = 0
        elif name == "end" and env is not None:
          if not envs: d.bad(i, f"\\end{{{env}}} without \\begin")
          elif envs[-1][0] != env: d.bad(i, f"\\end{{{env}}} closes \\begin{{{envs[-1][0]}}} of line {d.line(envs[-1][1])}")
          else: envs.pop()
        if env is not None:                 # the name's braces are not counted
          i = k; continue
      elif name == "multicolumn":
        n, _ = d.group(j)
        if n and n.strip().isdigit(): cells += int(n) - 1
      elif name not in KNOWN_COMMANDS and name not in defined:
        d.bad(i, f"unknown command \\{name}")
      i = j; continue
    if c == "{": braces.append(i)
    elif c == "}":
      if not braces: d.bad(i, "} without {")
      else: braces.pop()
    elif c == "$":
      math_at = i if math_at is None else None
    elif c in "_^" and math_at is None:
      d.bad(i, f"unescaped {c!r} outside math")
    elif c == "#" and not in_preamble:
      d.bad(i, "unescaped '#'")
    elif c == "~":
      d.bad(i, "unescaped '~'")
    elif c == "\n" and math_at is not None and t.startswith("\n\n", i):
      d.bad(math_at, "$ opens math that the paragraph does not close"); math_at = None
    elif c == "&":
      if math_at is not None and envs and envs[-1][0] in TABLE_ENVS:
        d.bad(math_at, "$ opens math that the table cell does not close"); math_at = None
      if math_at is None and not (envs and envs[-1][0] in TABLE_ENVS): d.bad(i, "unescaped '&' outside a table")
      elif envs and envs[-1][0] in TABLE_ENVS and len(braces) == envs[-1][3]: cells += 1
    i += 1
  for p in braces: d.bad(p, "{ is never closed")
  for env, p, _, _ in envs: d.bad(p, f"\\begin{{{env}}} is never ended")
  if math_at is not None: d.bad(math_at, "$ opens math that is never closed")
  _check_frame(d)
  return d.problems


def _check_usepackage(d: _Doc, i: int, j: int, in_preamble: bool) -> None:
  """\\usepackage at i (its name ends at j): known packages only, in the preamble only."""
  pkgs, _ = d.group(d.optional(j))
  for p in (pkgs or "").split(","):
    if p.strip() and p.strip() not in KNOWN_PACKAGES: d.bad(i, f"package {p.strip()!r} is not in the known set {sorted(KNOWN_PACKAGES)}")
  if not in_preamble: d.bad(i, "\\usepackage after \\begin{document}")


def _check_frame(d: _Doc) -> None:
  """What the whole text must be: ASCII, from \\documentclass to \\end{document}."""
  t = d.text
  for m in re.finditer(r"[^\x00-\x7f]", t): d.bad(m.start(), f"non-ASCII character {m.group()!r}")
  if not t.lstrip().startswith("\\documentclass"): d.bad(0, "the document does not start with \\documentclass")
  if not re.search(r"\\end\{document\}\s*$", t): d.bad(len(t) - 1, "the document does not end with \\end{document}")


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if not argv:
    print("usage: python -m tinyspec.docgen.texcheck FILE.tex...", file=sys.stderr); return 2
  worst = 0
  for path in argv:
    try: text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
      print(f"{path}: cannot read: {e}", file=sys.stderr); worst = 2; continue
    for p in check_tex(text): print(f"{path}: {p}")
    if check_tex(text): worst = max(worst, 1)
  return worst


if __name__ == "__main__":
  sys.exit(main())
