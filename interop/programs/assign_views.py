"""Assigns through views and into tensors that are not buffers: a strided slice (x[::3],
a PAD, RESHAPE and SHRINK of the buffer), a transposed window, a flipped half, a view
assigned twice, and a computed tensor assigned (twice) before it is realized."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

x, w, z = inputs(np.arange(10, dtype=np.float32), np.arange(12, dtype=np.float32).reshape(3, 4),
                 np.arange(8, dtype=np.float32))
x[::3].assign(Tensor([-1.0, -2.0, -3.0, -4.0]))
x.realize()
w.T[1:3].assign(w.T[1:3] * 10)
w.realize()
z.flip(0)[:3].assign(Tensor([7.0, 8.0, 9.0]))
z[4:6].assign(z[4:6] + 100)
z.realize()
y = x + 1
y.assign(y * 2)
y.assign(y - 3)
y.realize()
