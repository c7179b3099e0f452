"""Dropout in training mode after a seed: the mask is drawn from tinygrad's RNG, whose
counter is a copy to the device assigned in the same realize (an assign into a tensor
that is not a buffer yet)."""
import numpy as np
from tinygrad import Tensor
from tinygrad.helpers import Context
from _compositions import inputs

Tensor.manual_seed(7)
rng = np.random.default_rng(43)
x, = inputs(rng.standard_normal((4, 6), dtype=np.float32))
with Context(TRAINING=1):
  x.dropout(0.25).realize()
  (x.dropout(0.5) * 2).sum().realize()
