"""Two AdamW steps on a two-layer MLP with a cross-entropy loss: the moments and step
counters are made by the first step's realize and read by the second's."""
import numpy as np
from tinygrad.helpers import Context
from tinygrad.nn import Linear
from tinygrad.nn.optim import AdamW
from _compositions import inputs

rng = np.random.default_rng(36)
l1, l2 = Linear(6, 8), Linear(8, 3)
for layer in (l1, l2):
  layer.weight, layer.bias = inputs(rng.standard_normal(layer.weight.shape, dtype=np.float32) * 0.4,
                                    rng.standard_normal(layer.bias.shape, dtype=np.float32) * 0.1)
x, = inputs(rng.standard_normal((10, 6), dtype=np.float32))
y, = inputs(rng.integers(0, 3, 10, dtype=np.int32))
opt = AdamW([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.01, weight_decay=0.1)
with Context(TRAINING=1):
  for _ in range(2):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
    opt.step()
    loss.realize()
