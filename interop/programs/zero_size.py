"""Tensors with a zero-size axis: a gradient through a sum over an empty axis, and a sum
along one (the identity). tinygrad's NPY buffer of a zero-size array cannot be viewed: the
capture reads it as empty without asking."""
import numpy as np
from tinygrad import Tensor

x = Tensor(np.zeros((4, 0), np.float32))
g, = x.sum(axis=0).sum().gradient(x)
g.realize()
Tensor.realize(Tensor.ones(3, 0).sum(1), Tensor(np.zeros((0, 5), np.int32)).max(0))
