"""Reductions over a prime-length axis (7 x 4099): a float sum, max and argmax, and a
wrapping int32 product."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(42)
x, = inputs(rng.standard_normal((7, 4099), dtype=np.float32))
i, = inputs(rng.integers(-3, 4, (7, 4099), dtype=np.int32))
Tensor.realize(x.sum(1), x.max(1), x.argmax(1), i.prod(1))
