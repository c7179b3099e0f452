"""refimpl: the NumPy reference evaluator of the tinyspec tables.

    from tinyspec.refimpl import evaluate
    outputs = evaluate(graph, {"buf0": x})

See refimpl/engine.py for the contract (inputs, outputs, trace, budget), refimpl/ops for
the one unit per op, refimpl/storage.py for STORE/AFTER semantics, refimpl/carried.py and
refimpl/loops.py for kernels whose loops carry a dependency, and refimpl/interpreter.py for
the plain point-by-point interpreter that defines what evaluate() must compute.
"""
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import supported_ops
from tinyspec.refimpl.engine import evaluate, EvalResult

__all__ = ["evaluate", "EvalError", "EvalResult", "supported_ops"]
