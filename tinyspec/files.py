"""One rule for the files tinyspec reads and writes.

Reading: every file is opened as a regular file (a FIFO, a device or a directory is
refused without blocking) and read up to a size limit; .npy and .npz arrays are checked
by their headers (plain numeric dtype, rank, elements, bytes against the memory budget,
a file that holds what its header promises) before their data is read.

Writing: every path is a sanitized name inside the directory the user gave. A name is
made of letters, digits, `_` and `-` (not first), in dot-separated parts (`out0.1` names
element 1 of a tuple root, `03_rangeify.k0` a stage, `numpy-example` a backend);
anything else (`../x`, `/abs`, a newline, a leading dot) is refused with rule path.name. (BUFFER and PARAM names in a graph
are identifiers by the arg schema, so the validator refuses them first.) Files are written to a temporary name in the same directory and renamed
into place, so a planted symlink is replaced, never followed, and a reader never sees half
a file.

Text that came from a file or a backend is passed through printable() before it reaches
a terminal: control characters are escaped and every continuation line is indented, so
nothing can move the cursor, clear the screen or forge a summary line.

Failures raise FileRefused(path, rule, message, exit_code); str() of it is the line to
print: `PATH: message [rule]`.
"""
from __future__ import annotations
import os
import re
import stat
import tempfile
from pathlib import Path
import numpy as np
from numpy.lib import format as fmt
from tinyspec.limits import limits
import zipfile

NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*\Z")   # no "/", no leading "." or "-", no ".."
MAX_NAME = 128
_NPY_KINDS = "biuf"        # bool, signed, unsigned, float: what a tinyspec dtype is stored as
_NPY_HEADER_MAX = 10000    # NumPy's own default bound on a .npy header


class FileRefused(Exception):
  """A file that is not read or written: `rule` says why, `exit_code` what the CLI exits with."""
  def __init__(self, path, rule: str, message: str, exit_code: int = 2):
    self.path, self.rule, self.message, self.exit_code = str(path), rule, message, exit_code
    super().__init__(f"{printable(self.path)}: {message} [{rule}]")


# ------------------------------------------------------------------ reading
def open_regular(path, limit: int | None = None):
  """A binary file object for path, which must be a regular file (of at most `limit`
  bytes). Opened non-blocking, so a FIFO is refused instead of waiting for a writer."""
  try:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
  except (OSError, ValueError, TypeError) as e:
    raise FileRefused(path, "file.read", f"cannot read file: {getattr(e, 'strerror', None) or e}") from None
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
      kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
             "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file"
      raise FileRefused(path, "file.read", f"cannot read file: it is {kind}, not a regular file")
    if limit is not None and st.st_size > limit:
      raise FileRefused(path, "file.limit", f"the file has {st.st_size:,} bytes, more than the {limit:,} allowed")
    if hasattr(os, "set_blocking"): os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
  except BaseException:
    os.close(fd)
    raise


def read_regular(path, limit: int, what: str = "the file") -> bytes:
  """The bytes of a regular file of at most `limit` bytes (FileRefused otherwise)."""
  with open_regular(path, limit) as f:
    try: data = f.read(limit + 1)
    except OSError as e: raise FileRefused(path, "file.read", f"cannot read file: {e.strerror or e}") from None
  if len(data) > limit:   # it grew while being read (or lies about its size, as /proc files do)
    raise FileRefused(path, "file.limit", f"{what} has more than the {limit:,} bytes allowed")
  return data


def read_text(path, limit: int, what: str = "the file") -> str:
  data = read_regular(path, limit, what)
  try: return data.decode("utf-8")
  except UnicodeDecodeError as e: raise FileRefused(path, "file.parse", f"not UTF-8 text (byte {e.start})") from None


# ------------------------------------------------------------------ arrays
def _npy_header(f, path):
  """(dtype, shape, fortran_order) of the .npy stream f, positioned at its data."""
  try:
    version = fmt.read_magic(f)
    if version not in ((1, 0), (2, 0), (3, 0)): raise ValueError(f"unknown .npy format version {version}")
    reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = reader(f, max_header_size=_NPY_HEADER_MAX)
  except Exception as e:   # NumPy's header parser raises many kinds (ValueError, SyntaxError, tokenize.TokenError ...)
    raise FileRefused(path, "file.parse", f"not a .npy array ({printable(str(e).splitlines()[0][:200]) if str(e) else type(e).__name__})") from None
  dtype = np.dtype(dtype)
  if dtype.names is not None or dtype.subdtype is not None or dtype.hasobject or dtype.kind not in _NPY_KINDS:
    raise FileRefused(path, "file.schema", f"the array's dtype {printable(str(dtype))[:100]} is not a plain bool, integer or float dtype")
  return dtype, tuple(shape), fortran


def _check_shape(path, shape, dtype, budget: int | None) -> int:
  """The array's byte count, after checking its rank and size against the limits."""
  L = limits()
  if not all(type(d) is int and d >= 0 for d in shape):
    raise FileRefused(path, "file.parse", f"not a .npy array (the shape {printable(str(tuple(shape)))[:80]} is not made of dims >= 0)")
  if len(shape) > L.max_rank:
    raise FileRefused(path, "file.limit", f"the array has {len(shape)} dims, more than limits.max_rank = {L.max_rank}")
  n = 1
  for d in shape:
    n *= d
  if n > L.max_numel:
    raise FileRefused(path, "file.limit", f"the array has {n:,} elements, more than limits.max_numel = {L.max_numel:,}")
  nonzero = 1
  for d in shape:
    if d: nonzero *= d
  if nonzero > L.max_numel:   # (0, 2^40, 2^40): no elements, but no NumPy array has that shape
    raise FileRefused(path, "file.limit", f"the array's shape {tuple(shape)[:8]} has dims multiplying past limits.max_numel = {L.max_numel:,}")
  nbytes = n * dtype.itemsize
  if budget is not None and nbytes > budget:
    raise FileRefused(path, "eval.budget", f"the array needs {nbytes:,} bytes, over what is left of the memory budget "
                                           f"({max(budget, 0):,} bytes; --budget or TINYSPEC_EVAL_BUDGET)")
  return nbytes


def _read_array(f, path, budget: int | None, available: int | None):
  dtype, shape, fortran = _npy_header(f, path)
  nbytes = _check_shape(path, shape, dtype, budget)
  if available is not None and available - f.tell() < nbytes:
    raise FileRefused(path, "file.parse", f"truncated: the header promises {nbytes:,} bytes of data, the file holds {max(available - f.tell(), 0):,}")
  buf = bytearray(nbytes)
  got = f.readinto(buf) if nbytes else 0
  if got != nbytes:
    raise FileRefused(path, "file.parse", f"truncated: the header promises {nbytes:,} bytes of data, the file holds {got:,}")
  a = np.frombuffer(buf, dtype=dtype)
  return a.reshape(shape[::-1]).transpose() if fortran else a.reshape(shape)


def load_npy(path, budget: int | None = None):
  """The array of a .npy file, its header checked before its data is read: a plain
  numeric dtype, rank and elements within limits, at most `budget` bytes."""
  with open_regular(path) as f:
    size = os.fstat(f.fileno()).st_size
    try: return _read_array(f, path, budget, size)
    except OSError as e: raise FileRefused(path, "file.read", f"cannot read file: {e.strerror or e}") from None


def load_npz(path, budget: int | None = None) -> dict:
  """name -> array of a .npz archive; each member's declared size and header are checked
  against the budget left before it is decompressed (a small archive cannot expand into
  gigabytes)."""
  out = {}
  left = budget
  with open_regular(path) as f:
    try:
      with zipfile.ZipFile(f) as z:
        for info in z.infolist():
          name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
          where = f"{path}[{name}]"
          if left is not None and info.file_size > left + _NPY_HEADER_MAX + 256:
            raise FileRefused(where, "eval.budget", f"the member expands to {info.file_size:,} bytes, over what is left of the memory "
                                                    f"budget ({max(left, 0):,} bytes; --budget or TINYSPEC_EVAL_BUDGET)")
          with z.open(info) as m:
            a = _read_array(m, where, left, info.file_size)
          out[name] = a
          if left is not None: left -= a.nbytes
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, ValueError) as e:
      raise FileRefused(path, "file.parse", f"not a .npz archive ({str(e)[:200]})") from None
    except OSError as e:
      raise FileRefused(path, "file.read", f"cannot read file: {e.strerror or e}") from None
  return out


# ------------------------------------------------------------------ writing
def check_name(name, what: str = "name") -> str:
  """name, if it may become a file name (an identifier, element suffixes .k allowed);
  FileRefused (rule path.name, exit 1) otherwise."""
  if not isinstance(name, str) or len(name) > MAX_NAME or not NAME_RE.match(name):
    shown = printable(repr(name))[:80]
    raise FileRefused(shown, "path.name", f"the {what} is not a plain file name (letters, digits, _ and - in dot-separated "
                                          f"parts, at most {MAX_NAME} characters): refused", exit_code=1)
  return name


def make_dir(directory) -> Path:
  """The directory the user gave, created if missing (FileRefused path.write if it cannot be)."""
  d = Path(directory)
  if not d.exists() and (bad := control_character(str(d))):   # a name no terminal or script shows as it is
    raise FileRefused(directory, "path.name", f"the directory to create holds the control character {bad}: refused")
  try:
    d.mkdir(parents=True, exist_ok=True)
  except (OSError, ValueError) as e:
    raise FileRefused(directory, "path.write", f"cannot create the directory: {getattr(e, 'strerror', None) or e}") from None
  if not d.is_dir(): raise FileRefused(directory, "path.write", "cannot create the directory: it is a file")
  return d


def output_path(directory, name: str, suffix: str = "", what: str = "output name") -> Path:
  """DIR/NAME+suffix for a sanitized name; the path stays inside DIR."""
  check_name(name, what)
  d = Path(directory)
  p = d / (name + suffix)
  if p.parent != d: raise FileRefused(p, "path.name", f"the {what} leaves the directory {d}", exit_code=1)
  return p


def write_file(path, write) -> Path:
  """Write a file through a temporary name in its directory and rename it into place.
  `write` is bytes, str, or a function of a binary file object."""
  path = Path(path)
  d = path.parent
  try:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=d)
  except (OSError, ValueError) as e:
    raise FileRefused(path, "path.write", f"cannot write: {getattr(e, 'strerror', None) or e}") from None
  try:
    with os.fdopen(fd, "wb") as f:
      if callable(write): write(f)
      else: f.write(write.encode() if isinstance(write, str) else write)
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except OSError as e:
    _unlink(tmp)
    raise FileRefused(path, "path.write", f"cannot write: {e.strerror or e}") from None
  except BaseException:
    _unlink(tmp)
    raise
  return path


def _unlink(p):
  try: os.unlink(p)
  except OSError: pass


def _umask() -> int:
  m = os.umask(0o22); os.umask(m)
  return m


def npy_form(array) -> np.ndarray:
  """An array as a .npy file holds it: bfloat16 and the float8s (ml_dtypes; the .npy format
  has no such dtypes, NumPy would write an opaque `|V2` that reads back as void) as their
  bit patterns (uint16, uint8), the form of the case corpus and of the protocol's files."""
  a = np.asarray(array)
  user_defined = a.dtype.isbuiltin == 2   # a type registered with NumPy from outside it: ml_dtypes'
  return np.array(a, order="C").view(f"uint{a.dtype.itemsize * 8}") if user_defined else a


def save_npy(directory, name: str, array, what: str = "output name") -> Path:
  """DIR/NAME.npy for a sanitized name (no pickles; bfloat16 as npy_form says)."""
  p = output_path(directory, name, ".npy", what)
  return write_file(p, lambda f: np.save(f, npy_form(array), allow_pickle=False))


def save_npz(path, arrays: dict) -> Path:
  """A .npz archive at a path the user gave; member names sanitized (bfloat16 as npy_form says)."""
  for k in arrays: check_name(k)
  forms: dict = {k: npy_form(v) for k, v in arrays.items()}
  return write_file(path, lambda f: np.savez(f, **forms))


# ------------------------------------------------------------------ text for terminals
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


_SETTING_CONTROL = re.compile("[\t\n" + _CONTROL.pattern[1:])


def control_character(text: str) -> str | None:
  """The first character a setting may not hold, as U+XXXX: NUL and every other control
  character (tab and newline too: C0, DEL, C1) and the bidi controls printable() escapes;
  None when there is none."""
  m = _SETTING_CONTROL.search(text)
  return None if m is None else f"U+{ord(m.group()):04X}"


def _escape(m) -> str:
  c = ord(m.group())
  return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text, newline: str = "\n    ") -> str:
  """text safe for a terminal (and for XML 1.0): control and bidi characters escaped as
  \\xNN / \\uNNNN, every line after the first indented by `newline` (nothing printed
  can start a line of its own, such as a forged summary)."""
  s = _CONTROL.sub(_escape, str(text))
  s = s.encode("utf-8", "backslashreplace").decode("utf-8")   # lone surrogates
  return s.replace("\n", newline) if newline != "\n" else s
