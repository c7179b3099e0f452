"""RMS normalization over the last axis (x * rsqrt(mean(x^2) + eps)) with a weight."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(12)
x, w = inputs(rng.standard_normal((4, 32), dtype=np.float32), rng.standard_normal(32, dtype=np.float32))
(x * (x.square().mean(-1, keepdim=True) + 1e-6).rsqrt() * w).realize()
