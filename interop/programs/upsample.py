"""Resizing feature maps: bilinear (align_corners) and nearest interpolation upward, and an
average pool downward (tinygrad's interpolate and avg_pool2d)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(48)
x, = inputs(rng.standard_normal((1, 2, 3, 4), dtype=np.float32))
Tensor.realize(x.interpolate((5, 7), mode="linear", align_corners=True), x.interpolate((6, 8), mode="nearest"),
               x.avg_pool2d((1, 2)))
