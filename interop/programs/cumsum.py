"""Tensor.cumsum (tinygrad's pad-and-window prefix sum), float and int."""
import numpy as np
from _compositions import inputs

x, n = inputs(np.linspace(-1, 1, 10, dtype=np.float32), np.arange(1, 8, dtype=np.int32))
x.cumsum().realize()
n.cumsum().realize()
