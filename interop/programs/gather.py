"""The Dialect document's gather composition (one-hot mask, reduce)."""
import numpy as np
from _compositions import gather, inputs

T, idx = inputs(np.array([10., 20., 30., 40., 50.], dtype=np.float32), np.array([4, 0, 2, 2], dtype=np.int32))
gather(T, idx).realize()
