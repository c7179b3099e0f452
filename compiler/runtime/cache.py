"""The on-disk program cache: $TINYSPEC_CACHE (default ~/.cache/tinyspec).

A cache is trusted only when it is the user's own: its root and every folder in it must
belong to this user and be writable by no one else. Otherwise this process uses a private
temporary cache instead and says so once on stderr (rule cache.unsafe): another user who
could write there could have planted a library that dlopen would run.

Every entry is stored with a signature kept apart from it (`NAME.sig`: an HMAC-SHA256 of
the entry's bytes under the cache's key, `.key`, 32 random bytes readable by this user
only). fetch() returns an entry's bytes only when they match their signature, so garbage,
a half-written file or a file this cache did not write is never used: the caller rebuilds
it and store() replaces it. The C runtime then loads those very bytes (through a memfd),
so nothing can change between the check and dlopen.
"""
from __future__ import annotations
import atexit
import hashlib
import hmac
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from tinyspec.files import read_regular, FileRefused
from tinyspec.files import write_file

KEY_FILE = ".key"
SIG_SUFFIX = ".sig"
MAX_ENTRY = 1 << 30          # bytes of one entry read back at most
_state: dict = {"private": None, "warned": False, "key": {}}


def digest(*parts: str) -> str:
  h = hashlib.sha256()
  for p in parts:
    h.update(p.encode()); h.update(b"\0")
  return h.hexdigest()[:32]


def configured_root() -> Path:
  return Path(os.environ.get("TINYSPEC_CACHE") or Path.home() / ".cache" / "tinyspec")


def _unsafe(d: Path) -> str | None:
  """Why folder d cannot be trusted (None: it is this user's own and only writable by them)."""
  try: st = os.lstat(d)
  except OSError as e: return f"cannot be read ({e.strerror or e})"
  if stat.S_ISLNK(st.st_mode):
    try: st = os.stat(d)
    except OSError as e: return f"cannot be read ({e.strerror or e})"
  if not stat.S_ISDIR(st.st_mode): return "not a directory"
  if hasattr(os, "geteuid") and st.st_uid != os.geteuid(): return f"owned by another user (uid {st.st_uid})"
  if st.st_mode & 0o022: return f"writable by {'others' if st.st_mode & 0o002 else 'its group'} (mode {stat.S_IMODE(st.st_mode):o})"
  return None


def _private() -> Path:
  """This process's own temporary cache (removed when it exits)."""
  if _state["private"] is None:
    d = Path(tempfile.mkdtemp(prefix="tinyspec-cache-"))
    atexit.register(shutil.rmtree, d, True)
    _state["private"] = d
  return _state["private"]


def _refuse(d: Path, why: str) -> Path:
  if not _state["warned"]:
    _state["warned"] = True
    print(f"tinyspec: the program cache {d} is {why}: not used; this process caches in a private temporary folder "
          "(chmod go-w it, or set TINYSPEC_CACHE to a folder of your own) [cache.unsafe]", file=sys.stderr)
  return _private()


def cache_dir(sub: str = "") -> Path:
  """The cache folder `sub` (created with mode 0700), or the private temporary cache's
  when the configured one cannot be trusted."""
  base = configured_root()
  for d in (base, base / sub) if sub else (base,):
    try: d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e: return _fallback(sub, _refuse(d, f"not usable ({e.strerror or e})"))
    # (the root may be a link the user made; a folder inside it may not: its files would land elsewhere)
    why = "a symbolic link" if d != base and os.path.islink(d) else _unsafe(d)
    if why: return _fallback(sub, _refuse(d, why))
  return base / sub if sub else base


def _fallback(sub: str, root: Path) -> Path:
  d = root / sub if sub else root
  d.mkdir(mode=0o700, parents=True, exist_ok=True)
  return d


def _key(root: Path) -> bytes | None:
  """The cache's signing key, made on first use. A key that is not this user's private
  32-byte file is replaced (every entry then rebuilds once); None if none can be made."""
  got = _state["key"].get(root)
  if got is not None: return got
  path = root / KEY_FILE
  for _ in range(2):
    if not os.path.lexists(path): _new_key(root, path)
    key = _read_key(path)
    if key is not None:
      _state["key"][root] = key
      return key
    try: os.unlink(path)
    except OSError: return None
  return None


def _new_key(root: Path, path: Path) -> None:
  try:
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".key.")   # mode 0600
  except OSError: return
  try:
    os.write(fd, os.urandom(32)); os.close(fd)
    try: os.link(tmp, path)          # atomic: of two processes racing here, both keep the first key
    except FileExistsError: pass
  except OSError: pass
  finally:
    try: os.unlink(tmp)
    except OSError: pass


def _read_key(path: Path) -> bytes | None:
  try:
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()): return None
    with open(path, "rb") as f: key = f.read(33)
  except OSError: return None
  return key if len(key) == 32 else None


def _sign(key: bytes, data: bytes) -> str:
  return hmac.new(key, data, hashlib.sha256).hexdigest()


def fetch(path: Path) -> bytes | None:
  """The bytes of cache entry `path` when they match their signature, else None (then the
  caller rebuilds the entry and stores it again)."""
  key = _key(path.parent.parent)
  if key is None: return None
  try:
    data = read_regular(path, MAX_ENTRY)
    sig = read_regular(Path(str(path) + SIG_SUFFIX), 128)
  except FileRefused:
    return None
  return data if hmac.compare_digest(sig, _sign(key, data).encode()) else None


def store(path: Path, data: bytes) -> None:
  """Write an entry and its signature (each atomically: a reader sees the old or the new
  file; a reader that sees a new entry with an old signature rebuilds)."""
  key = _key(path.parent.parent)
  if key is None: return
  try:
    write_file(Path(str(path) + SIG_SUFFIX), _sign(key, data))
    write_file(path, data)
  except FileRefused:
    pass   # a cache that cannot be written is only slower
