"""refimpl: the NumPy reference evaluator of the tinyspec tables.

    from tinyspec.refimpl import evaluate
    outputs = evaluate(graph, {"buf0": x})

See refimpl/engine.py for the contract (inputs, outputs, trace, budget), refimpl/ops for
the one unit per op, refimpl/storage.py for STORE/AFTER semantics and refimpl/loops.py
for kernels whose loops carry a dependency.
"""
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import supported_ops
from tinyspec.refimpl.engine import evaluate, EvalResult

__all__ = ["evaluate", "EvalError", "EvalResult", "supported_ops"]
