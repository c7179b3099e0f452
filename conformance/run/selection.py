"""Choosing cases by id: pytest's `-k` expressions, exact `--case` ids.

  -k "MAX or IDIV"              either
  -k "ADD and not float"        both
  -k "(MUL or ADD) and int32"   parentheses
  -k "ADD/*"                    a term with * or ? is a glob over the whole id
  --case ADD/float32            exactly that id (repeatable)

The grammar is pytest's (`_pytest/mark/expression.py`, without the keyword arguments
that only `-m` takes):

  expression: expr? EOF
  expr:       and_expr ('or' and_expr)*
  and_expr:   not_expr ('and' not_expr)*
  not_expr:   'not' not_expr | '(' expr ')' | term
  term:       (\\w | : | + | - | . | [ | ] | \\\\ | / | * | ?)+

A term matches an id it is a substring of, ignoring case, as pytest matches test names;
a term holding `*` or `?` is a glob that must match the whole id (also ignoring case).
Substrings are pytest's rule, so `-k MUL/int32` also selects `MUL/int32-narrowed`: `--case`
is the exact choice. Several `-k` must all hold.

The parser is our own, not `_pytest.mark.expression`: pytest is not a dependency of the
command line (only of the `[test]` extra), and that module is private (its `evaluate`
signature changed in pytest 8). tests/conformance/test_conformance_selection.py holds this grammar to
pytest's own wherever pytest is installed.
"""
from __future__ import annotations
import difflib
import fnmatch
import re
from typing import Callable, Iterable

_TOKEN = re.compile(r"\s*(?:(?P<paren>[()])|(?P<term>[\w:+\-.\[\]\\/*?]+)|(?P<bad>\S))")
_KEYWORDS = ("and", "or", "not")
MAX_DEPTH = 100   # nested `not` and parentheses: deeper is refused, not a RecursionError


class SelectionError(ValueError):
  """A -k expression that does not parse, or a --case id that names no case."""


def _tokens(text: str) -> list[tuple[str, str, int]]:
  """(kind, text, column) with kind one of ( ) and or not term end; column counts from 1."""
  out, pos = [], 0
  while True:
    m = _TOKEN.match(text, pos)
    if m is None or m.end() == m.start() or (m.lastgroup is None):
      out.append(("end", "", len(text) + 1)); return out
    col = m.start(m.lastgroup) + 1
    if m.lastgroup == "bad": raise SelectionError(f"-k {_short(text)}: unexpected character {m.group('bad')!r} at column {col}")
    v = m.group(m.lastgroup)
    out.append((v if m.lastgroup == "paren" or v in _KEYWORDS else "term", v, col))
    pos = m.end()


class Expression:
  """A compiled -k expression; `matches(case_id)`."""

  def __init__(self, text: str):
    self.text = text
    self._toks = _tokens(text)
    self._at = self._depth = 0
    self._fn = (lambda cid: True) if self._peek("end") else self._or()   # an empty -k is no filter, as in pytest
    if not self._peek("end"): self._fail("end of input")

  def matches(self, case_id: str) -> bool: return bool(self._fn(case_id.lower()))

  # -- recursive descent over the grammar above
  def _peek(self, kind: str) -> bool: return self._toks[self._at][0] == kind

  def _take(self, kind: str) -> bool:
    if self._peek(kind): self._at += 1; return True
    return False

  def _fail(self, wanted: str):
    kind, v, col = self._toks[self._at]
    got = "end of input" if kind == "end" else repr(v)
    raise SelectionError(f"-k {_short(self.text)}: at column {col}: expected {wanted}; got {got}")

  def _or(self) -> Callable[[str], bool]:
    parts = [self._and()]
    while self._take("or"): parts.append(self._and())
    return parts[0] if len(parts) == 1 else lambda cid: any(p(cid) for p in parts)

  def _and(self) -> Callable[[str], bool]:
    parts = [self._not()]
    while self._take("and"): parts.append(self._not())
    return parts[0] if len(parts) == 1 else lambda cid: all(p(cid) for p in parts)

  def _not(self) -> Callable[[str], bool]:
    self._depth += 1
    if self._depth > MAX_DEPTH: raise SelectionError(f"-k {_short(self.text)}: nested more than {MAX_DEPTH} deep")
    try: return self._unary()
    finally: self._depth -= 1

  def _unary(self) -> Callable[[str], bool]:
    if self._take("not"):
      inner = self._not()
      return lambda cid: not inner(cid)
    if self._take("("):
      inner = self._or()
      if not self._take(")"): self._fail("right parenthesis")
      return inner
    if self._peek("term"):
      term = self._toks[self._at][1].lower()
      self._at += 1
      if "*" in term or "?" in term: return lambda cid: fnmatch.fnmatchcase(cid, term)
      return lambda cid: term in cid
    self._fail("not, left parenthesis or a name")


def compile_all(expressions: Iterable[str] | None) -> list[Expression]:
  """Every -k compiled (SelectionError for the first that does not parse)."""
  return [Expression(e) for e in expressions or ()]


def select(cases: Iterable, expressions: Iterable[str] | None = None, ids: Iterable[str] | None = None) -> list:
  """The cases matching every -k expression and, when `ids` are given, whose id is one of
  them. An id that names no case raises SelectionError with the nearest ids."""
  cases = list(cases)
  exprs = compile_all(expressions)
  if ids:
    known = {c.id for c in cases}
    for i in ids:
      if i not in known: raise SelectionError(f"--case {i!r}: no such case{did_you_mean(i, known)}")
    wanted = set(ids)
    cases = [c for c in cases if c.id in wanted]
  return [c for c in cases if all(e.matches(c.id) for e in exprs)]


def did_you_mean(name: str, known: Iterable[str], what: str = "") -> str:
  """`; did you mean 'X'?` naming the nearest of `known` (case-insensitive), or ''."""
  known = list(known)
  lower = {k.lower(): k for k in known}
  near = difflib.get_close_matches(name.lower(), list(lower), n=3, cutoff=0.6)
  if not near: return ""
  return f"; did you mean {' or '.join(repr(lower[n]) for n in near)}?"


def describe(expressions: Iterable[str] | None, ids: Iterable[str] | None) -> str:
  """The selection in words, for `no case matches ...`."""
  parts = [f"-k {e!r}" for e in expressions or ()] + [f"--case {i!r}" for i in ids or ()]
  return " and ".join(parts)


def _short(text: str) -> str:
  """An expression as an error message quotes it: at most 200 characters."""
  return repr(text) if len(text) <= 200 else repr(text[:200]) + "..."
