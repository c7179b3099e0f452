"""Resizing and padding modes: bilinear and nearest interpolation, reflect, replicate and
circular padding and a constant fill."""
import numpy as np
from _compositions import inputs

x, = inputs(np.random.default_rng(8).standard_normal((1, 1, 4, 5)).astype(np.float32))
x.interpolate((8, 10), mode="linear").realize()
x.interpolate((7, 3), mode="nearest").realize()
for mode in ("reflect", "replicate", "circular"): x.pad((1, 2, 2, 1), mode=mode).realize()
x.pad((1, 2, 2, 1), value=-1.5).realize()
