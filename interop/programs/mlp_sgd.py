"""An MLP's backward pass and an SGD step (weights updated in place with assign)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(18)
x, y, w1, w2 = inputs(rng.standard_normal((8, 4), dtype=np.float32), rng.standard_normal((8, 3), dtype=np.float32),
                      rng.standard_normal((4, 6), dtype=np.float32) * 0.5, rng.standard_normal((6, 3), dtype=np.float32) * 0.5)
loss = ((x @ w1).tanh() @ w2 - y).square().mean()
g1, g2 = loss.gradient(w1, w2)
w1.assign(w1 - 0.1 * g1)
w2.assign(w2 - 0.1 * g2)
Tensor.realize(loss, w1, w2)
