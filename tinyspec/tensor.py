"""The lazy Tensor front end (implemented in tinyspec/frontend/): `from tinyspec.tensor import Tensor, function`."""
from tinyspec.frontend import Tensor, function, realize, export, GraphError, register_backend, compositions, collectives

__all__ = ["Tensor", "function", "realize", "export", "GraphError", "register_backend", "compositions", "collectives"]
