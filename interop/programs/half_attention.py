"""Scaled dot-product attention in float16 (tinygrad's half matmuls, softmax in float32
and back). On tinygrad's PYTHON device float16 is emulated (stored as uint16: the lowered
programs' PARAMs are uint16, the kernels' float16)."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(5)
q, k, v = inputs(*(rng.standard_normal((1, 2, 4, 8)).astype(np.float16) for _ in range(3)))
q.scaled_dot_product_attention(k, v).realize()
