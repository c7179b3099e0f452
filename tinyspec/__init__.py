"""tinyspec: an executable specification of tinygrad's UOp IR.

The tables in spec/*.yaml are the single source of truth; this package reads them to
validate graphs and derive their properties. The NumPy reference evaluator lives in
`refimpl`, the lowering compiler in `compiler`, the conformance suite in `conformance`.
"""
from tinyspec.dtypes import DType, dtype, DTYPES
from tinyspec.tables import Tables, tables
from tinyspec.uop import UOp
from tinyspec.graph import Graph, Node
from tinyspec.validate import validate, Diagnostic, ValidationResult

__all__ = ["DType", "dtype", "DTYPES", "Tables", "tables", "UOp", "Graph", "Node", "validate", "Diagnostic", "ValidationResult"]
__version__ = "0.1.0"
