"""One Hypothesis search for a failure: what the fuzz (driver.py) runs once per round and
the sanitizer fuzz (sanitize.py) once per failure it finds.

    count, failure = search(strategy, 40, seed, check, seen)

`check(example, found)` returns a checks.Failure or None; `found` is the failure being
shrunk (None until one is found), so a check may narrow itself to that kind. A failure
whose signature is in `seen` (a kind already reported) does not count. Hypothesis shrinks
the first new failure; the smallest one it reached is returned.
"""
from __future__ import annotations
import warnings
from hypothesis import given, settings, seed as hseed, HealthCheck, Phase
from hypothesis.errors import Unsatisfiable
from tinyspec.conformance.fuzz.checks import PropertyFailed


def search(strategy, examples: int, seed: int, check, seen: set, shrink: bool = True, shrink_calls: int | None = None,
           unsatisfiable_ok: bool = False, log=None, database=None, database_key: bytes | None = None):
  """(examples checked, the smallest new failure or None). shrink_calls: checks spent
  shrinking at most (the smallest failure so far is kept); unsatisfiable_ok: a strategy
  that cannot draw (every attempt rejected) ends the search instead of raising.
  database: a Hypothesis example database whose entries under database_key (a family's or
  a device's, conformance/findings.py) are replayed first, and where a failure is saved."""
  count, last, shrinks = [0], [None], [0]
  phases = ([Phase.reuse] if database is not None else []) + [Phase.generate] + ([Phase.shrink] if shrink else [])

  @settings(max_examples=examples, deadline=None, database=database, report_multiple_bugs=False, print_blob=False,
            suppress_health_check=list(HealthCheck), phases=phases)
  @hseed(seed)
  @given(strategy)
  def prop(example):
    count[0] += 1
    if last[0] is not None:
      shrinks[0] += 1
      if shrink_calls is not None and shrinks[0] > shrink_calls: return   # enough: Hypothesis stops
    f = check(example, last[0])
    if f is not None and f.signature not in seen:
      last[0] = f
      raise PropertyFailed(f)

  if database is not None and database_key is not None:
    # (Hypothesis keys its entries by the test's source, the same for every search here: the
    # search's own key makes a family's failing examples replay in that family's searches)
    prop._hypothesis_internal_database_key = database_key
  try:
    with warnings.catch_warnings():   # Hypothesis's repr of a failing example (dataclasses of arrays): unused here
      warnings.filterwarnings("ignore", message="Generating overly large repr")
      # (in a Dask worker thread the event loop's thread draws from the global `random` while a
      # strategy runs; Hypothesis takes that for the strategy's own use: no strategy here uses it)
      warnings.filterwarnings("ignore", message="Do not use the `random` module inside strategies")
      prop()
  except PropertyFailed: pass
  except Exception as e:
    if isinstance(e, Unsatisfiable) and unsatisfiable_ok: pass
    elif last[0] is None: raise
    elif log: log(f"note: {type(e).__name__} while shrinking; the failure is kept as found")   # not replayed (flaky): kept
  return count[0], last[0]
