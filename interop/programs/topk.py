"""Top-k values and indices along the last axis (tinygrad's topk: a sort network of comparisons)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(17)
x, = inputs(rng.permutation(48).astype(np.float32).reshape(3, 16))   # distinct values: the order is unique
values, indices = x.topk(4)
Tensor.realize(values, indices)
