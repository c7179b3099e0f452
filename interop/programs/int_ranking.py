"""Integer ranking: each element's rank by pairwise comparison counts, tinygrad's argsort
and sort of int32 rows (its bitonic network), and a stable rank of ties."""
import numpy as np
from tinygrad import Tensor, dtypes
from _compositions import inputs

rng = np.random.default_rng(40)
x, = inputs(rng.permutation(24).astype(np.int32).reshape(3, 8) - 10)
ties, = inputs(rng.integers(0, 4, 8, dtype=np.int32))
rank = (x.unsqueeze(-1) > x.unsqueeze(-2)).sum(-1).cast(dtypes.int32)
tie_rank = ((ties.unsqueeze(0) < ties.unsqueeze(1)) | ((ties.unsqueeze(0) == ties.unsqueeze(1)) & Tensor.ones(8, 8, dtype=dtypes.bool).tril(-1))).sum(-1)
values, order = x.sort(-1)
Tensor.realize(rank, tie_rank, values, order, x.argsort(-1, descending=True))
