"""argmax along an axis (tinygrad: max, compare, an arange-weighted max reduce)."""
import numpy as np
from _compositions import inputs

x, = inputs(np.array([[1., 7., 3., 7.], [-2., -1., -5., 0.], [4., 4., 4., 4.]], dtype=np.float32))
x.argmax(axis=1).realize()
