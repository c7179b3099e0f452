"""crmath: correctly rounded exp2, log2, sin and pow for the reference evaluator.

    from tinyspec.refimpl import crmath
    y = crmath.exp2(x, fmt="float32")      # x: float64 array of float32 values
    crmath.pow(a, b, fmt="bfloat16")       # a, b broadcast together

Each result element is the exact function value rounded to nearest, ties to even, in
the target format ("float16", "bfloat16", "float32", "float64": subnormals, overflow to
±inf, signed zeros), returned as a float64 holding it. A correctly rounded value is
unique, so the result is the same on every host and NumPy version: nothing here calls a
libm function (NumPy's or math's), whose last bits vary with the version and the SIMD
path. Special values follow C99 Annex F (pow included); NaN results are some NaN.
Inputs are float64 arrays whose values the format can hold (other float64 values are
rounded correctly as well, just more slowly).

How: a fast vectorized tier 1 in float64 (formats of at most 24 bits), a tier 2 in
double-double, each with a proven error bound and a rounding test (rounding.decide);
the few elements neither decides go to an exact fallback (Ziv's strategy with mpmath,
exact cases by integer arithmetic; exact.py). The subpackage uses only NumPy and mpmath.

Files: dd.py (error-free transformations), rounding.py (formats, round_to, the rounding
test), consts.py (constants and tables, derived with mpmath and exact rationals),
engine.py (broadcasting, chunking, the tier cascade, stats), exp2.py, log2.py, sin.py,
pow.py (the functions, their tiers and measured/claimed error bounds), exact.py.
"""
from .engine import reset_stats, stats
from .exp2 import exp2
from .log2 import log2
from .pow import pow
from .rounding import FORMATS, Format, round_to
from .sin import sin

__all__ = ["FORMATS", "Format", "exp2", "log2", "pow", "reset_stats", "round_to", "sin", "stats"]
