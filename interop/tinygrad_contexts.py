"""The contexts of the importer's walk (interop/tinygrad_import.py): what the consumer of a
tinygrad UOp needs from it. A context is a hashable tuple; the walk converts a UOp once
per context it is wanted in."""
from __future__ import annotations


def V(dtype: str | None = None): return ("v", dtype)   # a value (dtype: the one a weak source adopts)
SHAPE = ("shape",)      # a shape operand: index CONST / VCONST (STACK when symbolic)
INDEX = ("index",)      # a ()-shaped index value (a RANGE bound, a window offset)
RANGE = ("range",)      # the RANGE node itself (END, REDUCE range slots)
TARGET = ("target",)    # a STORE target: the INDEX, its mask kept aside
