"""The Dialect document's prefix_sum composition (pad, tile, trim, windows, reduce)."""
import numpy as np
from _compositions import prefix_sum, inputs

T, = inputs(np.arange(1, 9, dtype=np.float32))
prefix_sum(T).realize()
