"""Average pooling (2x2, stride 2) and a global average pool."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(14)
x, = inputs(rng.standard_normal((2, 3, 4, 4), dtype=np.float32))
Tensor.realize(x.avg_pool2d((2, 2)), x.mean((2, 3)))
