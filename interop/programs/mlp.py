"""A small MLP: forward pass, mean squared error, and the backward pass (gradients of every weight)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(5)
x, y, w1, b1, w2, b2 = inputs(
  rng.standard_normal((4, 6), dtype=np.float32), rng.standard_normal((4, 2), dtype=np.float32),
  rng.standard_normal((6, 8), dtype=np.float32) * 0.5, np.full(8, 0.1, dtype=np.float32),
  rng.standard_normal((8, 2), dtype=np.float32) * 0.5, np.zeros(2, dtype=np.float32))
out = (x @ w1 + b1).relu() @ w2 + b2
loss = ((out - y) ** 2).mean()
grads = loss.gradient(w1, b1, w2, b2)
Tensor.realize(loss, *grads)
