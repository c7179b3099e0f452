"""Integer hashing on uint32 (a multiply-xorshift mix: wrapping MUL, SHR, XOR) and a bucket index (MOD)."""
import numpy as np
from tinygrad import Tensor, dtypes
from _compositions import inputs

rng = np.random.default_rng(16)
keys, = inputs(rng.integers(0, 2**32, 64, dtype=np.uint32))
h = keys
h = h ^ (h >> 16)
h = h * 0x7feb352d
h = h ^ (h >> 15)
h = h * 0x846ca68b
h = h ^ (h >> 16)
Tensor.realize(h, (h % 13).cast(dtypes.int32))
