"""The gradient of a loss through LayerNorm and GELU with respect to the input and the
norm's weight and bias (Tensor.gradient)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(46)
x, w, b = inputs(rng.standard_normal((3, 8), dtype=np.float32), rng.standard_normal(8, dtype=np.float32),
                 rng.standard_normal(8, dtype=np.float32))
loss = (x.layernorm() * w + b).gelu().square().mean()
Tensor.realize(loss, *loss.gradient(x, w, b))
