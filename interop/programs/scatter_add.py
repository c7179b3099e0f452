"""The Dialect document's scatter_add composition (repeated indices accumulate)."""
import numpy as np
from _compositions import scatter_add, inputs

T, idx, val = inputs(np.zeros(5, dtype=np.float32), np.array([1, 3, 1, 4], dtype=np.int32),
                     np.array([1., 2., 3., 4.], dtype=np.float32))
scatter_add(T, idx, val).realize()
