"""The Dialect document's arange composition (prefix_sum of ones minus one), and Tensor.arange.

Both are built from constants only: tinygrad gives such a tensor no device, so
`.realize()` has nothing to do; `.numpy()` copies it to the CPU, which realizes it."""
from tinygrad import Tensor
from _compositions import arange

arange(6).numpy()
Tensor.arange(6).numpy()
