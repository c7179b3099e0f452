"""An embedding lookup (one-hot gather of rows by integer ids) and a mean over the sequence."""
import numpy as np
from tinygrad import Tensor
from tinygrad.nn import Embedding
from _compositions import inputs

rng = np.random.default_rng(21)
emb = Embedding(10, 4)
emb.weight, = inputs(rng.standard_normal((10, 4), dtype=np.float32))
ids, = inputs(np.array([[1, 3, 3, 9], [0, 2, 5, 7]], dtype=np.int32))
e = emb(ids)
Tensor.realize(e, e.mean(1))
