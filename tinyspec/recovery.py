"""Going on below an invalid node (tinyspec/validate.py), so that one run reports every
error and no error that a fix upstream would make vanish.

A node that breaks only dtype rules (RECOVERABLE: its sources' dtypes do not fit, or its
declared dtype is not the derived one) still has the other properties its rules derive
(a MUL of float32 and int32 of shape (2, 3) has shape (2, 3)); only its dtype is
unknown: a fix may give it any value dtype. Its consumers are checked once per dtype it
may have (the derived one first), and a consumer is reported only where every one of
those checks finds it invalid: an error a fix of the dtype upstream could remove is a
cascade, left unsaid. A consumer that passes with some dtypes is unknown in its own dtype the same way
(the dtypes it derives from them), and its consumers are checked in turn. Anything else
an invalid node breaks (its shape, its arg, its sources' kinds) leaves its consumers
unchecked, as before.
"""
from __future__ import annotations
from itertools import product
from typing import Any
from math import prod
from tinyspec.dtypes import DTYPES
from tinyspec.intervals import dtype_range

RECOVERABLE = frozenset({"dtype.match", "dtype.allowed", "declared.dtype"})
VALUE_DTYPES = tuple(n for n in DTYPES if n != "void")   # what a fixed value node may have
MAX_RUNS = 256     # checks of one consumer at most (its unknown sources' dtypes multiplied); beyond, it stays unchecked
MAX_TOTAL_RUNS = 20_000   # checks of all consumers of invalid nodes in one validation


def recoverable(rules) -> bool:
  return bool(rules) and all(r in RECOVERABLE for r in rules)


def derive_guess(derive, src, arg, name, lvl, v, guess: list) -> None:
  """Append v to `guess` with the properties derive gives it (nothing where it cannot)."""
  try: v.dtype, v.shape, v.device, v.addrspace, v.min_max, v.axis = derive(src, arg, name, lvl, v)
  except Exception: return     # nothing derivable: its consumers stay unchecked
  guess.append(v)


def with_dtype(view, dt: str):
  """A copy of a guessed view with dtype dt (and the interval of dt: the guessed one's is
  the derived dtype's)."""
  cls: type = type(view)
  c: Any = object.__new__(cls)
  for s in type(view).__slots__: setattr(c, s, getattr(view, s))
  if dt != view.dtype: c.dtype, c.min_max, c.value = dt, dtype_range(dt), None
  return c


class Below:
  """What is known below the invalid nodes of one validation: `guesses` (index -> (a View,
  the dtypes it may have)) and the checks left to spend on them (MAX_TOTAL_RUNS: however
  large the graph, recovery costs a bounded time; past it, consumers stay unchecked)."""
  def __init__(self):
    self.guesses: dict = {}
    self.runs_left = MAX_TOTAL_RUNS

  def note(self, i: int, view) -> None:
    """Node i is invalid, its dtype alone unknown: it may have every value dtype, the
    derived one first (a side effect or a tuple stays what it is: no fix makes it a value)."""
    others = tuple(d for d in VALUE_DTYPES if d != view.dtype) if view.dtype in VALUE_DTYPES else ()
    self.guesses[i] = (view, (view.dtype, *others))

  def check(self, i: int, srcs_i, views: list, run) -> list:
    """Node i, some of whose sources are invalid: the diagnostics every dtype of its
    unknown sources gives (and its own guess noted). run(srcs, report, guess) checks it
    over one choice of sources (the validator's _check: its View or None, each Diagnostic
    to report(d), a View of its own guess appended to the list `guess`); nothing is
    reported where a source is invalid beyond a guess, or the choices are too many."""
    unknown = [j for j in dict.fromkeys(srcs_i) if views[j] is None]
    if any(j not in self.guesses for j in unknown): return []
    runs = prod(len(self.guesses[j][1]) for j in unknown)
    if runs > min(MAX_RUNS, self.runs_left): return []
    self.runs_left -= runs
    results = []
    for dts in product(*(self.guesses[j][1] for j in unknown)):
      chosen = {j: with_dtype(self.guesses[j][0], dt) for j, dt in zip(unknown, dts)}
      got: list = []
      g: list = []
      v = run([views[j] if views[j] is not None else chosen[j] for j in srcs_i], got.append, g)
      results.append((v, got, g[0] if g else None))
    ok = [v for v, _, _ in results if v is not None]
    if ok:   # valid for some dtype: nothing to say (a dtype that moves its shape too, as BITCAST's, leaves it unknown)
      if all((v.shape, v.device, v.addrspace) == (ok[0].shape, ok[0].device, ok[0].addrspace) for v in ok):
        self.guesses[i] = (ok[0], tuple(dict.fromkeys(v.dtype for v in ok)))
      return []
    own = next((g for _, _, g in results if g is not None), None)
    if own is not None: self.note(i, own)
    return said(results)


def said(results: list) -> list:
  """What to report of a node invalid whatever dtypes its unknown sources get: the errors
  every choice gives; else those of the first choice that breaks a rule other than a dtype
  rule (a shape does not follow from a dtype: such an error is the node's own); else the
  derived dtypes' errors."""
  always = set.intersection(*({d.rule for d in diags} for _, diags, _ in results))
  if always: return [d for d in results[0][1] if d.rule in always]
  for _, diags, _ in results:
    own = [d for d in diags if d.rule not in RECOVERABLE]
    if own: return own
  return results[0][1]
