"""Assigns through views and into tensors that are not buffers: a strided slice (x[::3],
a PAD, RESHAPE and SHRINK of the buffer), a transposed window, a flipped half, a view
assigned twice, a computed tensor assigned (twice) before it is realized, and bits written
through a BITCAST of a buffer (tinygrad's test_assign_bitcast: of a window, and to another
itemsize), and an assign into a new buffer's CONTIGUOUS (tinygrad's test_assign_zeros_good:
it writes the buffer)."""
import numpy as np
from tinygrad import Tensor, dtypes
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
f = Tensor([1.0, 2.0, 3.0, 4.0]).contiguous().realize()
f.bitcast(dtypes.uint32).assign(Tensor([0x40800000, 0x40400000, 0x40000000, 0x3f800000], dtype=dtypes.uint32)).realize()
f[1:3].bitcast(dtypes.int32).assign(Tensor([0x41000000, 0x40E00000], dtype=dtypes.int32)).realize()
b = Tensor(np.zeros(8, np.uint8)).contiguous().realize()
b.bitcast(dtypes.int64).assign(Tensor([12345], dtype=dtypes.int64)).realize()
assert f.tolist() == [4.0, 8.0, 7.0, 1.0] and b.tolist() == [57, 48, 0, 0, 0, 0, 0, 0]
c = Tensor.zeros(2, 3).contiguous()
c.assign(Tensor.ones(2, 3) * 5)
c.realize()
