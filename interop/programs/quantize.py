"""Symmetric int8 quantization per row (scale = max|x| / 127, round, clip, cast) and back."""
import numpy as np
from tinygrad import Tensor, dtypes
from _compositions import inputs

rng = np.random.default_rng(15)
x, = inputs(rng.standard_normal((4, 16), dtype=np.float32) * 3)
scale = x.abs().max(-1, keepdim=True) / 127
q = (x / scale).round().clip(-127, 127).cast(dtypes.int8)
Tensor.realize(q, q.cast(dtypes.float32) * scale)
