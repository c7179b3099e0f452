"""Tensor.all and Tensor.any over an axis and over everything: tinygrad reduces bools with
MUL (AND) and MAX (OR); the spec reduces bools by MAX only (map table bool_reduce)."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(31)
m, = inputs(rng.standard_normal((5, 7), dtype=np.float32) > -1.0)
from tinygrad import Tensor   # noqa: E402
Tensor.realize(m.all(1), m.any(0), m.all(), (m & ~m).any(), m.all(0).all())
