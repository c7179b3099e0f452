"""The package's layers: every import (module-level, function-local, relative, and
importlib.import_module of a literal name) points down or sideways, never up, and no
modules import each other in a circle.

  core (tables, IR, backend interface and lookup)
  < evaluator, front end and pictures (tinyspec.show: it reads graphs and the validator's
    properties only, so the conformance report can draw with it) < compiler
  < conformance and interop < CLI and docs

The core finds what the layers above provide (backends, subcommands) through entry points
(tinyspec/plugins.py), never by importing them. There are no exceptions to list."""
from __future__ import annotations
import ast
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {   # installed package -> repository folder (as setup.py maps them)
  "tinyspec": "tinyspec", "tinyspec.spec": "spec", "tinyspec.refimpl": "refimpl",
  "tinyspec.compiler": "compiler", "tinyspec.conformance": "conformance", "tinyspec.interop": "interop",
  "tinyspec.show": "show", "tinyspec.docgen": "docgen",
}
LAYERS = [   # lowest first; a module belongs to the first entry that is it or a package above it
  ("core", ("tinyspec", "tinyspec.spec", "tinyspec.dtypes", "tinyspec.tables", "tinyspec.rules", "tinyspec.intervals",
            "tinyspec.frozen", "tinyspec.diagnostics", "tinyspec.props", "tinyspec.uop", "tinyspec.rewrite", "tinyspec.walk", "tinyspec.graph", "tinyspec.validate", "tinyspec.recovery",
            "tinyspec.decompose", "tinyspec.tolerance", "tinyspec.portable", "tinyspec.plugins", "tinyspec.backends",
            "tinyspec.limits", "tinyspec.files", "tinyspec.deadline", "tinyspec.environment", "tinyspec.dispatch",
            "tinyspec.errorbound", "tinyspec.errorbound_forms", "tinyspec.errorbound_accumulate", "tinyspec.errorbound_where",
            "tinyspec.errorbound_calls")),
  ("evaluator, front end and pictures", ("tinyspec.refimpl", "tinyspec.frontend", "tinyspec.tensor", "tinyspec.show")),
  ("compiler", ("tinyspec.compiler",)),
  ("conformance and interop", ("tinyspec.conformance", "tinyspec.interop")),
  ("CLI and docs", ("tinyspec.cli", "tinyspec.__main__", "tinyspec.docgen")),
]


def modules() -> dict[str, Path]:
  out = {}
  for pkg, folder in FOLDERS.items():
    for f in (ROOT / folder).rglob("*.py"):
      rel = f.relative_to(ROOT / folder).with_suffix("").parts
      if pkg == "tinyspec" and rel[0] in {v for v in FOLDERS.values() if v != "tinyspec"}: continue
      name = ".".join((pkg, *rel)).removesuffix(".__init__")
      out[name] = f
  return out


MODULES = modules()


def layer(mod: str) -> int:
  """The layer of a module: the most specific entry of LAYERS naming it or a package above it."""
  best, depth = None, -1
  for i, (_, names) in enumerate(LAYERS):
    for n in names:
      if (mod == n or mod.startswith(n + ".")) and n.count(".") > depth and (n != "tinyspec" or mod == "tinyspec"):
        best, depth = i, n.count(".")
  return best


def _resolve(name: str) -> str | None:
  """The module an imported name refers to (a module, or the module an attribute is in)."""
  while name and name not in MODULES: name = name.rpartition(".")[0]
  return name or None


def imports(mod: str, path: Path) -> set[str]:
  """Every tinyspec module `mod` imports anywhere in its file."""
  out = set()
  is_pkg = path.name == "__init__.py"
  for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    names = []
    if isinstance(n, ast.Import): names = [a.name for a in n.names]
    elif isinstance(n, ast.ImportFrom):
      base = n.module or ""
      if n.level:
        parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
        base = ".".join(parts[:len(parts) - n.level + 1] + ([n.module] if n.module else []))
      names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in n.names]
    elif isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", None)) == "import_module" \
        and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
      names = [n.args[0].value]
    for name in names:
      target = _resolve(name) if name.startswith("tinyspec") else None
      # a module's own packages are imported before it anyway: not an edge
      if target and target != mod and not mod.startswith(target + "."): out.add(target)
  return out


EDGES = {m: imports(m, p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
  assert [m for m in MODULES if layer(m) is None] == [], "add the new modules to LAYERS"


def test_no_import_points_up_a_layer():
  up = [f"{m} ({LAYERS[layer(m)][0]}) imports {t} ({LAYERS[layer(t)][0]})"
        for m, ts in sorted(EDGES.items()) for t in sorted(ts) if layer(t) > layer(m)]
  assert up == [], "\n".join(up)


def test_no_import_circles():
  index, low, stack, on, circles = {}, {}, [], set(), []
  def visit(v):   # Tarjan's strongly connected components, iteratively
    work = [(v, iter(sorted(EDGES[v])))]
    index[v] = low[v] = len(index); stack.append(v); on.add(v)
    while work:
      u, it = work[-1]
      w = next(it, None)
      if w is not None:
        if w not in index:
          index[w] = low[w] = len(index); stack.append(w); on.add(w)
          work.append((w, iter(sorted(EDGES[w]))))
        elif w in on: low[u] = min(low[u], index[w])
        continue
      work.pop()
      if work: low[work[-1][0]] = min(low[work[-1][0]], low[u])
      if low[u] == index[u]:
        comp = []
        while True:
          x = stack.pop(); on.discard(x); comp.append(x)
          if x == u: break
        if len(comp) > 1: circles.append(sorted(comp))
  for m in sorted(EDGES):
    if m not in index: visit(m)
  assert circles == [], "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("planted", ["upward", "circle"])
def test_the_checks_find_a_planted_edge(planted, monkeypatch):
  """The walk sees function-local and relative imports, and both checks fail on them."""
  src = "def f():\n  from tinyspec.compiler import compile_graph\n" if planted == "upward" else "from . import engine\n"
  mod = "tinyspec.refimpl.errors"
  found = imports(mod, _write(src))
  if planted == "upward":
    assert "tinyspec.compiler" in found and layer("tinyspec.compiler") > layer(mod)
  else:
    assert "tinyspec.refimpl.engine" in found and mod in _closure(EDGES, "tinyspec.refimpl.engine")


def _write(src: str) -> Path:
  import tempfile
  d = Path(tempfile.mkdtemp())
  p = d / "errors.py"
  p.write_text(src)
  return p


def _closure(edges: dict, start: str) -> set:
  seen, todo = set(), [start]
  while todo:
    m = todo.pop()
    for t in edges.get(m, ()):
      if t not in seen: seen.add(t); todo.append(t)
  return seen
