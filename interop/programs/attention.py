"""Scaled dot-product attention with a causal mask (matmul, scale, masked softmax, matmul)."""
import numpy as np
from _compositions import inputs

rng = np.random.default_rng(4)
q, k, v = inputs(*(rng.standard_normal((1, 2, 4, 8), dtype=np.float32) for _ in range(3)))
q.scaled_dot_product_attention(k, v, is_causal=True).realize()
