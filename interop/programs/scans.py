"""Scans along an axis: cumsum, cummax (values and indices), cumprod and logcumsumexp of
short rows, and a cummax over 600 elements, which tinygrad splits in chunks of 256 whose
kernels carry its Invalid constant as a value."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(39)
x, = inputs(rng.standard_normal((3, 9), dtype=np.float32))
long, = inputs(rng.standard_normal(600, dtype=np.float32))
values, idx = x.cummax(1)
Tensor.realize(x.cumsum(1), values, idx, (x.abs() * 0.5 + 0.7).cumprod(1), x.logcumsumexp(1))
long.cummax(0)[0].realize()
