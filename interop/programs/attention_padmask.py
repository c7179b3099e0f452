"""Attention with an explicit padding mask: masked_fill of -inf where a key is padding, softmax, weighted sum."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(11)
q, k, v = inputs(*(rng.standard_normal((2, 4, 8), dtype=np.float32) for _ in range(3)))
keep, = inputs(np.array([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=np.bool_))
scores = (q @ k.transpose(-1, -2)) / np.sqrt(8)
scores = keep.reshape(2, 1, 4).where(scores, -float("inf"))
(scores.softmax(-1) @ v).realize()
