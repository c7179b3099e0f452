"""Layer normalization over the last axis, with an affine weight and bias."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(2)
x, w, b = inputs(rng.standard_normal((3, 16), dtype=np.float32), rng.standard_normal(16, dtype=np.float32),
                 rng.standard_normal(16, dtype=np.float32))
(x.layernorm(axis=-1, eps=1e-5) * w + b).realize()
