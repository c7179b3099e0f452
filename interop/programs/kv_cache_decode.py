"""Two decode steps of attention with a KV cache, as tinygrad's LLaMA writes them: the new
key and value are assigned into a window of the cache (`cache_kv[:, :, pos:pos+1].assign`,
an assign into a view of a buffer), then the query attends to the cache up to pos."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

B, MAXT, H, D = 1, 6, 2, 8
rng = np.random.default_rng(33)
cache_kv, = inputs(np.zeros((2, B, MAXT, H, D), dtype=np.float32))
prefill, = inputs(rng.standard_normal((2, B, 3, H, D), dtype=np.float32))
cache_kv[:, :, 0:3].assign(prefill).realize()
for pos in (3, 4):
  xq, xk, xv = inputs(*(rng.standard_normal((B, 1, H, D), dtype=np.float32) for _ in range(3)))
  cache_kv[:, :, pos:pos + 1].assign(Tensor.stack(xk, xv)).realize()
  keys, values = cache_kv[0, :, 0:pos + 1], cache_kv[1, :, 0:pos + 1]
  q, k, v = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
  q.scaled_dot_product_attention(k, v).transpose(1, 2).reshape(B, 1, H * D).realize()
