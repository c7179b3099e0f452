"""A 2D convolution with padding and bias (tinygrad's pool/window movement ops, then a reduce)."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(3)
x, w, b = inputs(rng.standard_normal((1, 2, 6, 6), dtype=np.float32), rng.standard_normal((3, 2, 3, 3), dtype=np.float32),
                 rng.standard_normal(3, dtype=np.float32))
x.conv2d(w, b, padding=1).realize()
