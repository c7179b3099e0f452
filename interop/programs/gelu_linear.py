"""A linear layer with a GELU (tanh form: EXP2 inside) and a SiLU branch (sigmoid: RECIP of 1 + exp)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(20)
x, w, b = inputs(rng.standard_normal((4, 8), dtype=np.float32), rng.standard_normal((8, 8), dtype=np.float32) * 0.3,
                 rng.standard_normal(8, dtype=np.float32))
h = x @ w + b
Tensor.realize(h.gelu(), h.silu())
