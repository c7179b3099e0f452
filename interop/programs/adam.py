"""One Adam step (tinygrad.nn.optim.Adam) of a linear layer: the optimizer's state m and v
start as zeros and are assigned in the same realize, so their second assign stores into
AFTER(RESHAPE(BUFFER), STORE ...) (assign is STORE followed by AFTER)."""
import numpy as np
from tinygrad.helpers import Context
from tinygrad.nn.optim import Adam
from _compositions import inputs

rng = np.random.default_rng(26)
x, y, w = inputs(rng.standard_normal((8, 4), dtype=np.float32), rng.standard_normal((8, 3), dtype=np.float32),
                 rng.standard_normal((4, 3), dtype=np.float32))
opt = Adam([w], lr=0.01)
with Context(TRAINING=1):
  opt.zero_grad()
  ((x @ w) - y).square().mean().backward()
  opt.step()
