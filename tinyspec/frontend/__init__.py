"""The lazy Tensor front end: builds tinyspec UOp graphs and realizes them on a backend.

  from tinyspec.frontend import Tensor, function
  from tinyspec.frontend import compositions, collectives
"""
from tinyspec.frontend.derive import GraphError, derive
from tinyspec.frontend.tensor import Tensor, realize, export, dtype_name
from tinyspec.frontend.function import function
from tinyspec.frontend.backends import register_backend, get_backend, backend_names
from tinyspec.frontend import compositions, collectives

__all__ = ["Tensor", "function", "realize", "export", "GraphError", "derive", "dtype_name", "register_backend", "get_backend",
           "backend_names", "compositions", "collectives"]
