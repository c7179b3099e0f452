"""Small tinygrad programs with the kernel forms tinygrad emits for what its test_ops.py
tests (a tinygrad script: `tinyspec import-tinygrad tests/refimpl/tinygrad_forms.py`).
tests/refimpl/test_refimpl_definition.py imports it and checks that the reference evaluator
and the interpreter that defines it agree bit for bit on every kernel and program it yields.

  * REG accumulators over odd and prime lengths (sum, max, a wrapping int product), argmax
    (tinygrad's WHERE(CMPLT) maximum of an integer key), reductions with upcast registers,
    mean/var (two kernels, the second reading the first's result);
  * cumsum and cummax (a REDUCE over a padded window), gather, an embedding lookup;
  * matmul of odd sizes, a small conv2d with padding, softmax.
Sizes are small (the interpreter runs every point of every loop in Python) but past what
tinygrad unrolls: a reduction over 37 elements is a loop.
"""
import numpy as np
from tinygrad import Tensor

rng = np.random.default_rng(5)


def floats(*shape): return Tensor(rng.standard_normal(shape).astype(np.float32)).realize()


def ints(*shape, lo=-3, hi=4): return Tensor(rng.integers(lo, hi, shape, dtype=np.int32)).realize()


x, k = floats(3, 37), ints(3, 37)
Tensor.realize(x.sum(1), x.max(1), x.argmax(1), k.prod(1))
y = floats(16, 36)
Tensor.realize(y.sum(0), y.min(1), y.var(1))
z = floats(1, 37)
Tensor.realize(z.cumsum(1), *z.cummax(1))
t, idx = floats(6, 5), ints(6, 3, lo=0, hi=5)
Tensor.realize(t.gather(1, idx), floats(10, 4)[ints(2, 3, lo=0, hi=10)])
Tensor.realize(floats(5, 37) @ floats(37, 3), floats(1, 4, 5, 5).conv2d(floats(3, 4, 3, 3), padding=1), floats(3, 37).softmax(1))
