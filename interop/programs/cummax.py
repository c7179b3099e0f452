"""Running maximum and product along an axis (cummax: MAX over a windowed pad; cumprod: MUL)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(22)
x, = inputs(rng.standard_normal((3, 8), dtype=np.float32))
Tensor.realize(x.cummax(1)[0], (x.abs() + 0.5).cumprod(1))
