"""A ResNet basic block in inference mode: conv3x3-BatchNorm-ReLU, conv3x3-BatchNorm, the
identity added back, ReLU (tinygrad's nn.Conv2d and nn.BatchNorm with running statistics)."""
import numpy as np
from tinygrad.nn import BatchNorm, Conv2d
from _compositions import inputs

C = 4
rng = np.random.default_rng(38)
conv1, conv2 = Conv2d(C, C, 3, padding=1, bias=False), Conv2d(C, C, 3, padding=1, bias=False)
for conv in (conv1, conv2): conv.weight, = inputs(rng.standard_normal(conv.weight.shape, dtype=np.float32) * 0.3)
bn1, bn2 = BatchNorm(C), BatchNorm(C)
for bn in (bn1, bn2):
  bn.weight, bn.bias, bn.running_mean = inputs(*(rng.standard_normal(C, dtype=np.float32) for _ in range(3)))
  bn.running_var, = inputs(rng.uniform(0.5, 2, C).astype(np.float32))
x, = inputs(rng.standard_normal((1, C, 6, 6), dtype=np.float32))
out = bn2(conv2(bn1(conv1(x)).relu()))
(out + x).relu().realize()
