"""LLaMA's feed-forward: w2(silu(w1(x)) * w3(x)), bias-free linears, after an RMSNorm."""
import numpy as np
from tinygrad.nn import Linear, RMSNorm
from _compositions import inputs

DIM, HIDDEN = 16, 24
rng = np.random.default_rng(35)
w1, w2, w3 = Linear(DIM, HIDDEN, bias=False), Linear(HIDDEN, DIM, bias=False), Linear(DIM, HIDDEN, bias=False)
for layer in (w1, w2, w3): layer.weight, = inputs(rng.standard_normal(layer.weight.shape, dtype=np.float32) * 0.3)
norm = RMSNorm(DIM)
norm.weight, = inputs(rng.standard_normal(DIM, dtype=np.float32))
x, = inputs(rng.standard_normal((2, 3, DIM), dtype=np.float32))
h = norm(x)
(x + w2(w1(h).silu() * w3(h))).realize()
