"""A causal mask made with Tensor.ones(bool).tril() inside the realize (a buffer the realize
allocates and fills before it reads it) and masked_fill of attention scores."""
import numpy as np
from tinygrad import Tensor, dtypes
from _compositions import inputs

T = 5
rng = np.random.default_rng(44)
scores, = inputs(rng.standard_normal((2, T, T), dtype=np.float32))
mask = Tensor.ones(T, T, dtype=dtypes.bool).tril()
scores.masked_fill(mask.logical_not(), float("-inf")).softmax(-1).realize()
