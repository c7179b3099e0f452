"""The case corpus (conformance/cases/, layout in its README.md): reading and writing cases.

A case is a folder holding `case.json` (the metadata), the graph file and .npy arrays.
Positive cases give inputs, the expected outputs and per-output tolerances; negative
cases name an invalid graph (usually one of the rule corpus, conformance/rules) and the
rule id a backend must refuse it by. Arrays are stored in the NumPy dtype that
spec/dtypes.yaml `np` names, except bfloat16, stored as its uint16 bit patterns (the .npy
format has no bfloat16), so that any NumPy-reading program can use the corpus.
"""
from __future__ import annotations
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
import os
import stat
import shlex
import numpy as np
from tinyspec.files import load_npy, read_text, FileRefused, printable, read_regular
from tinyspec.intervals import NUMPY_TYPES as NP, EXTENDED_FLOATS
from tinyspec.limits import limits
from tinyspec.conformance.corpus.caseschema import check

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"
CASE_FILE = "case.json"
FORMAT = "tinyspec-case"
VERSION = 1


class CaseError(Exception):
  """A malformed case folder (a bug in the corpus, not in a backend)."""


# ------------------------------------------------------------------ arrays
def storage_dtype(dt: str) -> np.dtype:
  """The dtype a dtype's values are stored in on disk: a float dtype NumPy holds only through
  ml_dtypes (bfloat16, the float8s; the .npy format has no such type) as its bit patterns."""
  if dt in EXTENDED_FLOATS: return np.dtype(f"uint{EXTENDED_FLOATS[dt].itemsize * 8}")
  return NP[dt]


def to_disk(x: np.ndarray, dt: str) -> np.ndarray:
  x = np.array(x, order="C", copy=True)   # (not ascontiguousarray: it makes a ()-shaped array (1,))
  if dt in EXTENDED_FLOATS: return x.view(storage_dtype(dt))
  return x.astype(storage_dtype(dt), copy=False)


def from_disk(x: np.ndarray, dt: str) -> np.ndarray:
  if dt in EXTENDED_FLOATS: return np.array(x, order="C", copy=True).view(NP[dt])
  return x.astype(NP[dt], copy=False)


def save_array(path: Path, x: np.ndarray, dt: str) -> None:
  np.save(path, to_disk(np.asarray(x), dt), allow_pickle=False)


def load_array(path: Path, dt: str) -> np.ndarray:
  """A corpus array (a checked .npy: tinyspec.files.load_npy)."""
  return from_disk(load_npy(path), dt)


def dtype_of_array(x: np.ndarray) -> str:
  """The tinyspec dtype name of a NumPy array (int64 reads as int64, not index)."""
  for name, t in NP.items():
    if name != "index" and t == x.dtype: return name
  raise TypeError(f"no tinyspec dtype for NumPy dtype {x.dtype}")


# ------------------------------------------------------------------ cases
@dataclass
class Output:
  name: str
  file: Path
  dtype: str
  ulp: object = 0              # a number or a Path to a float64 .npy of per-element bounds
  ulp_decomposed: object = 0
  portable: dict = field(default_factory=dict)   # the portable profile: ulp, ulp_decomposed (as above), alternatives [Paths]

  def bounds(self, decomposed: bool = False, profile: str = "strict"):
    if profile == "portable" and self.portable:
      b = self.portable.get("ulp_decomposed" if decomposed else "ulp", 0)
    else: b = self.ulp_decomposed if decomposed else self.ulp
    return load_npy(b) if isinstance(b, Path) else float(b)

  def alternatives(self, profile: str = "strict") -> list:
    """Other allowed results (arrays in the output's dtype), portable profile only."""
    if profile != "portable": return []
    return [load_array(p, self.dtype) for p in self.portable.get("alternatives", ())]


@dataclass
class ExecCase:
  id: str
  dir: Path
  kind: str                   # "positive" or "negative"
  graph: Path
  level: str = "auto"
  ops: list = field(default_factory=list)
  covers: list = field(default_factory=list)   # [op, dtype] pairs the case stands for in the coverage
  dtypes: list = field(default_factory=list)
  devices: list = field(default_factory=list)
  uses: dict = field(default_factory=dict)     # op -> levels the graph uses it at
  inputs: dict = field(default_factory=dict)   # name -> (Path, dtype)
  outputs: dict = field(default_factory=dict)  # name -> Output
  expect: dict = field(default_factory=dict)   # negative: {"rule", "node", "exit"}
  description: str = ""
  sha256: str = ""
  meta: dict = field(default_factory=dict)

  @property
  def valid(self) -> bool: return self.kind == "positive"

  def load_inputs(self) -> dict:
    return {k: load_array(p, dt) for k, (p, dt) in self.inputs.items()}


@dataclass
class BrokenCase:
  """A case folder whose case.json could not be read (load_cases' `broken`): its id (the
  folder below the corpus) and the error, which is that case's result."""
  id: str
  message: str


def _case(path: Path, root: Path) -> ExecCase:
  """One case.json, read as a regular file of at most limits.max_small_file bytes and
  checked field by field (CaseError naming the field otherwise)."""
  try:
    d = json.loads(read_text(path, limits().max_small_file, "case.json"))
  except FileRefused as e:
    raise CaseError(f"{e}") from None
  except (ValueError, RecursionError) as e:
    raise CaseError(f"{path}: not JSON ({str(e)[:200]}) [file.parse]") from None
  try:
    _check_case(d)
    base = path.parent
    def ulp(v): return base / v if isinstance(v, str) and v != "inf" else float(v)
    def portable(o):
      p = o.get("portable")
      if not p: return {}
      return {"ulp": ulp(p.get("ulp", 0)), "ulp_decomposed": ulp(p.get("ulp_decomposed", p.get("ulp", 0))),
              "alternatives": [base / a for a in p.get("alternatives", ())]}
    outs = {k: Output(k, base / o["file"], o["dtype"], ulp(o.get("ulp", 0)), ulp(o.get("ulp_decomposed", o.get("ulp", 0))), portable(o))
            for k, o in d.get("outputs", {}).items()}
    return ExecCase(
      id=d.get("id") or base.relative_to(root).as_posix(), dir=base, kind=d["kind"], graph=(base / d["graph"]).resolve(),
      level=d.get("level", "auto"), ops=list(d.get("ops", [])), covers=[tuple(c) for c in d.get("covers", [])],
      dtypes=list(d.get("dtypes", [])), devices=list(d.get("devices", [])), uses={k: set(v) for k, v in d.get("uses", {}).items()},
      inputs={k: (base / v["file"], v["dtype"]) for k, v in d.get("inputs", {}).items()}, outputs=outs,
      expect=dict(d.get("expect", {})), description=d.get("description", ""), sha256=d.get("sha256", ""), meta=d)
  except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
    what = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
    raise CaseError(printable(f"{path}: not a valid case ({what})"[:500]) + " [file.schema]") from None


def _check_case(d) -> None:
  """A case.json matches spec/case.schema.json (caseschema.Mismatch, a ValueError naming
  the first field that does not, as a dotted path)."""
  check(d)


def list_cases(root: Path | str | None = None) -> list[tuple[str, str]]:
  """(id, folder relative to root) of every case under root (default conformance/cases),
  sorted by id, reading no more of a case than its id (a case.json that cannot give one
  goes by its folder: load_case says what is wrong with it). CaseError for a root that
  cannot be listed, or two cases with one id."""
  root = Path(root) if root is not None else CASES_DIR
  try:
    if not root.is_dir(): raise CaseError(f"{root}: no such directory")
    paths = sorted(root.rglob(CASE_FILE))
  except OSError as e: raise CaseError(f"{root}: cannot be listed ({e.strerror or e}) [file.read]") from None
  out, most = [], limits().max_small_file
  for p in paths:
    folder = p.parent.relative_to(root).as_posix()
    cid = folder
    try:
      st = os.stat(p)   # (a FIFO or a device named case.json is not opened here)
      if stat.S_ISREG(st.st_mode) and st.st_size <= most:
        d = json.loads(p.read_bytes())
        if isinstance(d, dict) and isinstance(d.get("id"), str) and d["id"]: cid = d["id"]
    except (OSError, ValueError, RecursionError): pass
    out.append((cid, folder))
  ids = [c for c, _ in out]
  if len(set(ids)) != len(ids):
    raise CaseError(f"{root}: two cases have the id {sorted({i for i in ids if ids.count(i) > 1})[0]!r} [file.schema]")
  return sorted(out)


def load_case(root: Path | str, folder: str) -> ExecCase:
  """The case in `folder` (relative to the corpus `root`): CaseError where it cannot be read."""
  root = Path(root)
  return _case(root / folder / CASE_FILE, root)


def load_cases(root: Path | str | None = None, broken: list | None = None) -> list[ExecCase]:
  """Every case under root (default conformance/cases), sorted by id. A malformed case
  folder raises CaseError, or with `broken` (a list) is left out and appended to it as
  (its folder relative to root, the message): the other cases still run."""
  root = Path(root) if root is not None else CASES_DIR
  try:
    if not root.is_dir(): raise CaseError(f"{root}: no such directory")
    paths = sorted(root.rglob(CASE_FILE))
  except OSError as e: raise CaseError(f"{root}: cannot be listed ({e.strerror or e}) [file.read]") from None
  out = []
  for p in paths:
    try: out.append(_case(p, root))
    except CaseError as e:
      if broken is None: raise
      broken.append((p.parent.relative_to(root).as_posix(), str(e)))
  ids = [c.id for c in out]
  if len(set(ids)) != len(ids):
    dup = sorted({i for i in ids if ids.count(i) > 1})[0]
    if broken is None: raise CaseError(f"{root}: two cases have the id {dup!r} [file.schema]")
    broken.append((dup, f"two cases have the id {dup!r} [file.schema]"))
    out = [c for c in out if c.id != dup]
  return sorted(out, key=lambda c: c.id)


def case_digest(graph_bytes: bytes, files: list[tuple[str, bytes]]) -> str:
  """sha256 over the graph file and every array file, in name order."""
  h = hashlib.sha256()
  h.update(b"graph\0" + graph_bytes)
  for name, data in sorted(files):
    h.update(b"\0" + name.encode() + b"\0" + data)
  return h.hexdigest()


def digest_of(case: ExecCase) -> str:
  """sha256 over the case's files as case_digest() pins it (each read as a regular file
  within limits: a FIFO or a device in a case folder raises FileRefused, never blocks)."""
  files = [(p.name, _read(p)) for p, _ in case.inputs.values()]
  for o in case.outputs.values():
    files.append((o.file.name, _read(o.file)))
    extra = [o.ulp, o.ulp_decomposed, o.portable.get("ulp"), o.portable.get("ulp_decomposed"), *o.portable.get("alternatives", ())]
    for b in extra:
      if isinstance(b, Path) and b.name not in {n for n, _ in files}: files.append((b.name, _read(b)))
  return case_digest(_bytes_or_empty(case.graph), files)


def verify(case: ExecCase) -> str | None:
  """None when the case's files match its sha256 pin, else why not (rule case.pin)."""
  pin = f"`tinyspec case pin {shlex.quote(str(case.dir))}` pins it"
  if not case.sha256: return f"the case has no sha256 pin: {pin} (--no-verify runs it as it is) [case.pin]"
  try: got = digest_of(case)
  except FileRefused as e: return f"{e}"
  if got != case.sha256:
    return f"its files do not match its sha256 pin (tampered or stale): --no-verify runs it anyway; changed on purpose, {pin} again [case.pin]"
  return None


def _read(p: Path) -> bytes:
  return read_regular(p, limits().max_file_bytes, "a case file")


def _bytes_or_empty(p: Path) -> bytes:
  """A graph file's bytes; b"" for the negative cases whose point is a missing or unreadable file."""
  try: return _read(p)
  except FileRefused: return b""


def write_case(folder: Path, meta: dict, graph_text: str | None, inputs: dict, outputs: dict, graph_file: Path | None = None) -> dict:
  """Write one case. `inputs`: name -> (array, dtype); `outputs`: name -> (array, dtype,
  ulp, ulp_decomposed[, portable]) where the bounds are numbers or per-element arrays and
  portable is {ulp, ulp_decomposed, alternatives: [arrays]} (the portable profile). Returns the
  metadata written (with file names and the sha256). Without graph_text, meta["graph"]
  names a graph elsewhere, found at graph_file (the folder may be written elsewhere
  first and moved)."""
  folder.mkdir(parents=True, exist_ok=True)
  files: list[tuple[str, bytes]] = []
  def put(name, arr, dt):
    p = folder / name
    save_array(p, arr, dt) if dt is not None else np.save(p, arr, allow_pickle=False)
    files.append((name, p.read_bytes()))
    return name
  m = dict(meta)
  m["format"], m["version"] = FORMAT, VERSION
  if graph_text is not None:
    (folder / "graph.json").write_text(graph_text)
    m["graph"] = "graph.json"
  m["inputs"] = {k: {"file": put(f"in.{k}.npy", a, dt), "dtype": dt} for k, (a, dt) in sorted(inputs.items())}
  outs = {}
  def bound(b, name, squeeze=False):
    if np.ndim(b) == 0: return float(b) if not float(b).is_integer() else int(b) if np.isfinite(b) else "inf"
    b = np.asarray(b, np.float64)
    if squeeze and not b.size: return 0
    if squeeze and (b == b.reshape(-1)[0]).all() and np.isfinite(b.reshape(-1)[0]): return bound(b.reshape(-1)[0], name)
    return put(name, b, None)
  for k, (a, dt, ulp, ulpd, *rest) in sorted(outputs.items()):
    o = {"file": put(f"out.{k}.npy", a, dt), "dtype": dt}
    o["ulp"], o["ulp_decomposed"] = bound(ulp, f"ulp.{k}.npy"), bound(ulpd, f"ulpd.{k}.npy")
    if o["ulp"] == "inf" or o["ulp_decomposed"] == "inf": raise ValueError(f"{k}: an unbounded output needs a bounds array")
    if rest and rest[0]:
      p = rest[0]
      po = {"ulp": bound(p["ulp"], f"pulp.{k}.npy", True), "ulp_decomposed": bound(p["ulp_decomposed"], f"pulpd.{k}.npy", True),
            "alternatives": [put(f"alt{j}.{k}.npy", x, dt) for j, x in enumerate(p.get("alternatives", ()))]}
      if po["ulp"] == "inf" or po["ulp_decomposed"] == "inf": raise ValueError(f"{k}: an unbounded output needs a bounds array")
      if po != {"ulp": o["ulp"], "ulp_decomposed": o["ulp_decomposed"], "alternatives": []}: o["portable"] = po
    outs[k] = o
  m["outputs"] = outs
  gpath = graph_file if graph_file is not None and graph_text is None else (folder / m["graph"]).resolve()
  m["sha256"] = case_digest(_bytes_or_empty(gpath), files)
  (folder / CASE_FILE).write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
  return m
