"""Softmax over the last axis (tinygrad's Tensor.softmax: max-subtracted exp2, sum, reciprocal)."""
import numpy as np
from _compositions import inputs

x, = inputs(np.random.default_rng(1).standard_normal((4, 8), dtype=np.float32))
x.softmax(axis=-1).realize()
