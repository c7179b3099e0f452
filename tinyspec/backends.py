"""Backends: anything that runs a tinyspec graph on inputs and returns its outputs.

A backend is a small class:

    class MyBackend(Backend):
      name = "mine"
      def capabilities(self) -> Capabilities: ...   # ops (and levels), dtypes, devices
      def run(self, graph, inputs) -> dict: ...     # outputs keyed as refimpl.evaluate keys them

`graph` is a tinyspec Graph, `inputs` maps input names (`buf{slot}`, `param{slot}` or the
node's `name`: protocol.md, written by `tinyspec docs`) to NumPy arrays; the outputs come back as
`out{k}` for the k-th value root, or the stored buffers by input name for void roots. A
backend refuses a graph it cannot run by raising; an exception with a `rule` attribute
(refimpl.EvalError, compiler.CompileError) names the rule id it refuses by.

Backends are registered through the entry point group `tinyspec.backends` (pyproject.toml:
`[project.entry-points."tinyspec.backends"] mine = "mypkg.module:MyBackend"`), whose
object is a Backend class or a zero-argument factory; `register_backend(name, obj)` adds
one at run time. The built-in ones are `ref` (the NumPy reference evaluator), `c` and
`opencl` (the compiler's targets). `tinyspec conformance`, `tinyspec fuzz` and the front
end's `Tensor.realize(backend=...)` all look names up here.
"""
from __future__ import annotations
import fnmatch
from dataclasses import dataclass, field
import difflib
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.plugins import entry_points

ENTRY_POINT_GROUP = "tinyspec.backends"


@dataclass(frozen=True)
class Capabilities:
  """What a backend runs: ops (op -> the levels it runs the op at), dtypes, and device
  names (glob patterns; "*" is any device, an n-tuple device is held as one)."""
  ops: dict = field(default_factory=dict)
  dtypes: frozenset = frozenset()
  devices: tuple = ("*",)
  decomposed: bool = False   # computes decomposed ops through their decompositions (ops.yaml `decomposed_ulp` applies)
  validates: bool = True     # refuses invalid graphs (the corpus's negative cases apply)
  profile: str = "strict"    # the conformance profile it claims: strict (the canonical results) or portable (any allowed one)
  label: str = ""            # its configuration, where results depend on it (the tinygrad backend's device): manifests/<name>-<label>.yaml

  def missing(self, uses: dict, dtypes, devices) -> list[str]:
    """What a graph needs that this backend lacks: `uses` maps op -> levels used."""
    out = [f"op {op} at {lv} level" for op, lvs in sorted(uses.items()) for lv in sorted(lvs) if lv not in self.ops.get(op, ())]
    out += [f"dtype {d}" for d in sorted(set(dtypes) - set(self.dtypes))]
    out += [f"device {d}" for d in sorted(set(devices)) if not any(fnmatch.fnmatchcase(d, p) for p in self.devices)]
    return out

  def unknown_names(self) -> list[str]:
    """The ops, levels and dtypes declared that the tables do not have, each with the
    nearest known name (`op 'Add' (did you mean 'ADD'?)`): a misspelt name would otherwise
    make every case that needs it silently unsupported."""
    T = tables()
    def near(name, known):
      lower = {k.lower(): k for k in known}
      hit = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)
      return f"{name!r} (did you mean {lower[hit[0]]!r}?)" if hit else repr(name)
    out = [f"op {near(op, T.ops)}" for op in sorted(self.ops) if op not in T.ops]
    out += [f"level {near(lv, T.levels)} of op {op}" for op, lvs in sorted(self.ops.items()) for lv in sorted(lvs) if lv not in T.levels]
    out += [f"dtype {near(d, DTYPES)}" for d in sorted(self.dtypes) if d not in DTYPES]
    return out

  def to_json(self) -> dict:
    return {"ops": {k: sorted(v) for k, v in sorted(self.ops.items())}, "dtypes": sorted(self.dtypes), "devices": list(self.devices),
            "decomposed": self.decomposed, "validates": self.validates, "profile": self.profile, "label": self.label}

  @staticmethod
  def from_json(d: dict) -> "Capabilities":
    """Capabilities from a backend's hello; ValueError saying what is wrong when they are
    not of the protocol's form (an external backend's answer is not trusted)."""
    def strings(v, what):
      if not isinstance(v, list) or not all(isinstance(x, str) for x in v): raise ValueError(f"capabilities: '{what}' must be a list of strings")
      return v
    if not isinstance(d, dict): raise ValueError("capabilities must be an object")
    ops = d.get("ops", {})
    if not isinstance(ops, dict): raise ValueError("capabilities: 'ops' must map op names to lists of levels")
    for k, v in ops.items(): strings(v, f"ops.{k}"[:80])
    for key in ("decomposed", "validates"):
      if key in d and not isinstance(d[key], bool): raise ValueError(f"capabilities: '{key}' must be true or false")
    profile = d.get("profile", "strict")
    if profile not in ("strict", "portable"): raise ValueError("capabilities: 'profile' must be 'strict' or 'portable'")
    label = d.get("label") or ""
    if not isinstance(label, str) or (label and not label.replace("_", "").isalnum()):
      raise ValueError("capabilities: 'label' must be a name (letters, digits, _)")
    return Capabilities({str(k): frozenset(v) for k, v in ops.items()}, frozenset(strings(d.get("dtypes", []), "dtypes")),
                        tuple(strings(d.get("devices", ["*"]), "devices")), d.get("decomposed", False), d.get("validates", True),
                        profile, label)


def value_dtypes() -> frozenset:
  """Every dtype that holds values (all but void): what a backend runs by default."""
  return frozenset(n for n, d in DTYPES.items() if d.cls != "void")


class Unavailable(RuntimeError):
  """The backend cannot run on this machine (no OpenCL device that builds, no C compiler,
  tinygrad missing): its message says why and what to do. Raised by capabilities() (and by
  run() when the machine changed since); every entry point refuses once with it, exit 2."""
  rule = "backend.unavailable"


class Backend:
  """Base class: a name, capabilities(), run(graph, inputs). Optional: stages(graph), the
  intermediate graphs of a compiler (stage name -> Graph), which the conformance
  properties evaluate with the reference evaluator; `batch`, how many corpus cases the
  runner may merge into one graph per run (a compiler builds one program instead of many);
  `manifest`, the path of its conformance manifest (expected failures and exclusions,
  conformance/corpus/manifest.py), relative to the file of the module defining the class;
  `device_variable`, the environment variable that chooses its device, where one does (a
  run on Dask workers needs the worker resource NAME.DEVICE then: conformance/run/onworker.py)."""
  name = "?"
  batch = 1
  manifest: str | None = None
  device_variable: str | None = None

  def capabilities(self) -> Capabilities:
    T = tables()
    return Capabilities({n: frozenset(o.levels) for n, o in T.ops.items() if not o.untrusted}, value_dtypes())

  def run(self, graph, inputs: dict) -> dict:
    raise NotImplementedError

  def stages(self, graph) -> dict:
    return {}

  def describe(self) -> dict:
    """What the backend needs on this machine and whether it has it (`tinyspec backends`):
    {"status": "ok" | "unavailable", "why": ..., "details": [lines]}. The default asks
    capabilities(); a backend with more to say (devices, compilers) says it."""
    return describe_by_capabilities(self)

  def __repr__(self): return f"<backend {self.name}>"


def describe_by_capabilities(backend) -> dict:
  try:
    caps = capabilities_of(backend)
    return {"status": "ok", "details": [f"{len(caps.ops)} ops, {len(caps.dtypes)} dtypes"]}
  except Exception as e:    # a stranger's backend may raise anything: this is a report, not a run
    return {"status": "unavailable", "why": str(e) if isinstance(e, Unavailable) else f"{type(e).__name__}: {e}", "details": []}


# ------------------------------------------------------------------ the registry
_REGISTERED: dict[str, object] = {}   # names added with register_backend
_INSTANCES: dict[str, object] = {}


def _entry_points() -> dict:
  return entry_points(ENTRY_POINT_GROUP)


def register_backend(name: str, backend, replace: bool = True) -> None:
  """Add a backend: an object with run(graph, inputs), a Backend class, or a factory.
  With replace=False a name an entry point already provides is kept."""
  if not replace and name in _entry_points(): return
  if not (callable(getattr(backend, "run", None)) or callable(backend)):
    raise TypeError(f"backend {name!r} needs a run(graph, inputs) method")
  _REGISTERED[name] = backend
  _INSTANCES.pop(name, None)


def backend_names() -> list[str]:
  return sorted(set(_entry_points()) | set(_REGISTERED))


def _instantiate(obj, name: str):
  """A Backend class or factory is called; an object with run() is the backend itself."""
  if isinstance(obj, type) or (callable(obj) and not callable(getattr(obj, "run", None))): obj = obj()
  if not callable(getattr(obj, "run", None)):
    raise TypeError(f"a backend is a registered name or an object with run(graph, inputs), not {type(obj).__name__} ({name!r})")
  return obj


def capabilities_of(backend) -> Capabilities:
  """A backend's capabilities; an object with only run() declares every trusted op of the
  tables and every dtype (the Backend base class's default)."""
  caps = getattr(backend, "capabilities", None)
  return caps() if callable(caps) else Backend.capabilities(backend)


def get_backend(backend):
  """A backend object from a registered name, an entry-point name, or an object with run()."""
  if not isinstance(backend, str):
    return _instantiate(backend, getattr(backend, "name", "?"))
  name = backend
  if name in _INSTANCES: return _INSTANCES[name]
  if name in _REGISTERED: obj = _REGISTERED[name]
  elif name in _entry_points():
    try: obj = _entry_points()[name].load()
    except Exception as e: raise KeyError(f"backend {name!r}: its entry point cannot be loaded ({type(e).__name__}: {e})") from None
  else: raise KeyError(f"unknown backend {name!r}; registered: {', '.join(backend_names())}")
  inst = _INSTANCES[name] = _instantiate(obj, name)
  return inst
