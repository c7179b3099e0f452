"""The findings database: what the searches found, kept across runs in one SQLite file.

    db = Findings(path)                         # created when missing; one that is not ours: FindingsError
    done = db.done_units(hunt)                  # unit key -> its stored result (a resumed run skips these)
    db.record(hunt, unit_key, result, found)    # one transaction: the unit, and each finding counted once
    db.rows()                                   # every distinct finding (`tinyspec findings PATH`)

Tables:
  units     (hunt, key) -> the unit's result as JSON: a hunt (a search and its arguments,
            e.g. `sanitize seed=0 examples=200 families=...`) that runs again with the same
            database continues where it stopped: its finished units are not run again.
  findings  signature -> op, dtype class, device, kind of difference, its text, the shrunk
            repro (a case's graph and inputs, or a repro.py), how often it was found, when
            and by which unit first. The signature is the hunt's own (the tinygrad hunt's
            op, dtype class, device and kind; the sanitizer's property, op and dtype).
  examples  Hypothesis's example database (SQLiteExamples): the failing examples of one
            family or device, replayed first by the next search of it on any worker (a
            unit takes the entries of other hunts, as they were when its run started, so
            one process, N processes and a cluster still draw the same).

Every result is plain JSON (never a pickle): a database file from elsewhere is data, not
code. A file that is not a tinyspec findings database is refused (rule findings.db, exit 2).
"""
from __future__ import annotations
import base64
import io
import json
import sqlite3
import time
from pathlib import Path
import sys
import numpy as np
from tinyspec.files import printable

SCHEMA = "tinyspec-findings 1"
TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (hunt TEXT NOT NULL, key TEXT NOT NULL, result TEXT NOT NULL, finished TEXT NOT NULL,
                                  PRIMARY KEY (hunt, key));
CREATE TABLE IF NOT EXISTS findings (signature TEXT PRIMARY KEY, hunt TEXT NOT NULL, op TEXT, dtype_class TEXT, device TEXT,
                                     kind TEXT, text TEXT NOT NULL, repro TEXT, count INTEGER NOT NULL,
                                     first_seen TEXT NOT NULL, first_where TEXT NOT NULL, first_unit TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS examples (key BLOB NOT NULL, value BLOB NOT NULL, hunt TEXT NOT NULL, PRIMARY KEY (key, value));
"""
COLUMNS = ("signature", "hunt", "op", "dtype_class", "device", "kind", "text", "repro", "count", "first_seen", "first_where", "first_unit")


class FindingsError(ValueError):
  """A database file that cannot be used (its message names the file; rule findings.db)."""
  rule = "findings.db"


def _now() -> str:
  return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Findings:
  def __init__(self, path, create: bool = True):
    self.path = Path(path)
    try: exists, is_file = self.path.exists(), self.path.is_file()
    except (OSError, ValueError) as e:   # a name the file system cannot hold
      raise FindingsError(f"{str(self.path)[:200]}: cannot be used as a findings database: {getattr(e, 'strerror', None) or e} [findings.db]") from None
    if exists and not is_file:
      raise FindingsError(f"{self.path}: not a file, so not a findings database [findings.db]")
    if not exists and not create:
      raise FindingsError(f"{self.path}: no such findings database [findings.db]")
    try:
      self.db = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
      have = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
      if have and "meta" not in have: raise FindingsError(f"{self.path}: an SQLite file, but not a tinyspec findings database [findings.db]")
      if create: self.db.executescript(TABLES)
      row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() if "meta" in have or create else None
      if row is None and create: self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA,))
      elif row is None or row[0] != SCHEMA:
        raise FindingsError(f"{self.path}: a findings database of another kind ({row[0] if row else 'none'}; this tinyspec reads {SCHEMA}) [findings.db]")
      # (a write-ahead log: a unit's transaction is an append, not a synced rewrite; a crash loses at most the last units, which run again)
      self.db.execute("PRAGMA journal_mode=WAL"); self.db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError as e:
      raise FindingsError(f"{self.path}: cannot be used as a findings database: {e} [findings.db]") from None

  def close(self) -> None: self.db.close()

  # -- units
  def done_units(self, hunt: str) -> dict:
    """unit key -> its stored result, for the units of `hunt` that finished."""
    out = {}
    for key, text in self.db.execute("SELECT key, result FROM units WHERE hunt=?", (hunt,)):
      try: out[key] = json.loads(text)
      except ValueError: continue   # a damaged row: that unit runs again
    return out

  def record(self, hunt: str, unit_key: str, result: dict, found: list[dict], where: str) -> bool:
    """The unit's result and its findings in one transaction; False (nothing counted) when
    the unit was recorded before."""
    cur = self.db.cursor()
    cur.execute("BEGIN IMMEDIATE")
    try:
      cur.execute("INSERT OR IGNORE INTO units VALUES (?, ?, ?, ?)", (hunt, unit_key, json.dumps(result), _now()))
      if cur.rowcount == 0:
        cur.execute("ROLLBACK"); return False
      for f in found:
        cur.execute("UPDATE findings SET count = count + 1 WHERE signature=?", (f["signature"],))
        if cur.rowcount == 0:
          cur.execute("INSERT INTO findings VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (f["signature"], hunt.split(" ")[0], f.get("op"), f.get("dtype_class"), f.get("device"), f.get("kind"),
                       f["text"], f.get("repro"), 1, _now(), where, unit_key))
      for key, value in result.get("saved", []):
        cur.execute("INSERT OR IGNORE INTO examples VALUES (?, ?, ?)", (bytes.fromhex(key), bytes.fromhex(value), hunt))
      cur.execute("COMMIT")
    except BaseException:
      cur.execute("ROLLBACK"); raise
    return True

  def rows(self) -> list[dict]:
    """Every finding, the most often found first."""
    q = f"SELECT {', '.join(COLUMNS)} FROM findings ORDER BY count DESC, first_seen, signature"
    return [dict(zip(COLUMNS, r)) for r in self.db.execute(q)]

  # -- Hypothesis's examples
  def examples(self, prefix: bytes, hunt: str) -> list[tuple[bytes, bytes]]:
    """The example entries under keys starting with prefix, saved by hunts other than `hunt`."""
    rows = self.db.execute("SELECT key, value FROM examples WHERE hunt != ? AND substr(key, 1, ?) = ? ORDER BY key, value",
                           (hunt, len(prefix), prefix))
    return [(bytes(k), bytes(v)) for k, v in rows]


# ------------------------------------------------------------------ Hypothesis's example database
def example_database(entries):
  """A Hypothesis ExampleDatabase holding `entries` ((key, value) pairs, a snapshot of the
  findings database's examples); what a search saves in it is in its `.saved` (hex pairs
  the unit's result carries home, where record() stores them)."""
  from hypothesis.database import ExampleDatabase  # noqa: PLC0415 (hypothesis, a test extra: tinyspec findings works without it)

  class SQLiteExamples(ExampleDatabase):
    def __init__(self):
      super().__init__()
      self.data: dict = {}
      for k, v in entries: self.data.setdefault(bytes(k), set()).add(bytes(v))
      self.saved: list = []

    def fetch(self, key): yield from sorted(self.data.get(key, ()))
    def save(self, key, value):
      if value not in self.data.setdefault(key, set()):
        self.data[key].add(value)
        self.saved.append([key.hex(), value.hex()])
    def delete(self, key, value): self.data.get(key, set()).discard(value)
    def move(self, src, dest, value):
      self.delete(src, value)
      self.save(dest, value)

  return SQLiteExamples()


# ------------------------------------------------------------------ a case as text
def case_text(graph_json: str, inputs: dict) -> str:
  """A minimal case (its graph and inputs) as one JSON text: the inputs an .npz, base64."""
  buf = io.BytesIO()
  np.savez(buf, **{k: np.asarray(v) for k, v in inputs.items()})
  return json.dumps({"graph": json.loads(graph_json), "inputs_npz_base64": base64.b64encode(buf.getvalue()).decode()})


# ------------------------------------------------------------------ `tinyspec findings PATH`
def table_text(rows: list[dict]) -> str:
  if not rows: return "no findings"
  head = ["count", "first seen", "hunt", "op", "dtype class", "device", "kind", "finding"]
  body = [[str(r["count"]), r["first_seen"], r["hunt"], r["op"] or "-", r["dtype_class"] or "-", r["device"] or "-", r["kind"] or "-",
           r["text"].splitlines()[0][:100] if r["text"] else ""] for r in rows]
  widths = [max(len(x) for x in col) for col in zip(head, *body)]
  return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body])


def markdown_text(rows: list[dict]) -> str:
  """One section per finding, ready to paste into an issue."""
  out = [f"# {len(rows)} findings", ""]
  for r in rows:
    what = " ".join(x for x in (r["op"], r["dtype_class"], r["device"] and f"on {r['device']}", r["kind"]) if x) or r["signature"]
    out += [f"## {what}", "", f"Found {r['count']} time(s); first on {r['first_seen']} by {r['first_where']} (unit `{r['first_unit']}`).", "",
            "```", r["text"].strip(), "```", ""]
    if r["repro"]:
      lang = "python" if r["repro"].lstrip().startswith(('"""', "import", "#", "from")) else "json"
      out += ["Repro:", "", f"```{lang}", r["repro"].strip(), "```", ""]
  return "\n".join(out)


def findings_command(sub):
  p = sub.add_parser("findings", help="list the findings kept in a findings database",
                     description="List the distinct findings of `tinyspec fuzz` runs kept in a findings database (--db, "
                                 "default OUT/findings.sqlite): a table, JSON, or markdown for an issue. Exit 0, 2 for a file "
                                 "that is not a findings database.")
  p.add_argument("path", type=Path, metavar="PATH", help="the findings database")
  g = p.add_mutually_exclusive_group()
  g.add_argument("--json", action="store_true", help="every finding as a JSON list")
  g.add_argument("--markdown", action="store_true", help="markdown, one section per finding with its repro")

  def run(a) -> int:
    try: db = Findings(a.path, create=False)
    except FindingsError as e:
      print(printable(f"tinyspec findings: {e}"), file=sys.stderr); return 2
    try: rows = db.rows()
    finally: db.close()
    if a.json: print(json.dumps(rows, indent=1))
    elif a.markdown: print(printable(markdown_text(rows), newline="\n"))
    else: print(printable(table_text(rows), newline="\n"))
    return 0
  return p, run
