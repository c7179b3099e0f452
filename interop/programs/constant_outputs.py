"""Realizing several tensors at once where some are not computed by the realize: one made
from constants only (tinygrad keeps it on no device and does not realize it) and one that
is a realized buffer already. Every tensor given is an output, in the order given."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

x, = inputs(np.arange(4, dtype=np.float32))
Tensor.realize(Tensor.arange(4).float().cos(), x + 1, x, Tensor.full((2, 2), 3.5) * 2, x * 2)
