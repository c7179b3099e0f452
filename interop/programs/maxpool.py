"""2x2 max pooling with stride 2, and a 3x3 max pool with stride 1 and padding (-inf padded windows)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(13)
x, = inputs(rng.standard_normal((1, 2, 6, 6), dtype=np.float32))
Tensor.realize(x.max_pool2d((2, 2)), x.max_pool2d((3, 3), stride=1, padding=1))
