"""Multi-head attention written with einsum (bhqd,bhkd->bhqk and bhqk,bhkd->bhqd), scores
scaled and softmaxed."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(47)
q, k, v = inputs(*(rng.standard_normal((1, 2, 3, 4), dtype=np.float32) for _ in range(3)))
att = Tensor.einsum("bhqd,bhkd->bhqk", q, k).div(2).softmax(-1)
Tensor.einsum("bhqk,bhkd->bhqd", att, v).realize()
