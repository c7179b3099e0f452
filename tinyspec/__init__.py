"""tinyspec: an executable specification of tinygrad's UOp IR.

The tables (`tinyspec.spec`, the repository's spec/*.yaml) are the single source of
truth; this package reads them to validate graphs and derive their properties. The NumPy
reference evaluator is `tinyspec.refimpl`, the lowering compiler `tinyspec.compiler`, the
conformance suite `tinyspec.conformance`, tinygrad interop `tinyspec.interop`.

Layers (tests/core/test_layers.py holds every import to them; an import only points down):
  core: the tables, the IR (dtypes, rules, graph, uop, validate, decompose, tolerance),
        the backend interface and its entry-point lookup (backends, plugins)
  < tinyspec.refimpl, tinyspec.frontend, tinyspec.show  < tinyspec.compiler
  < tinyspec.conformance, tinyspec.interop  < tinyspec.cli, tinyspec.docgen
"""
from tinyspec.dtypes import DType, dtype, DTYPES
from tinyspec.tables import Tables, tables
from tinyspec.uop import UOp
from tinyspec.graph import Graph, Node
from tinyspec.validate import validate, Diagnostic, ValidationResult
from importlib.metadata import version, PackageNotFoundError

__all__ = ["DType", "dtype", "DTYPES", "Tables", "tables", "UOp", "Graph", "Node", "validate", "Diagnostic", "ValidationResult"]


def _version() -> str:
  try: return version("tinyspec")
  except PackageNotFoundError: return "0+unknown"   # a checkout that was never installed


__version__ = _version()
