"""Grouped-query attention (LLaMA 2/3): 4 query heads share 2 key/value heads, repeated
with `repeat_kv` as extra/models/llama.py writes it, then causal attention."""
import numpy as np
from _compositions import inputs

B, T, NH, NKV, D = 1, 5, 4, 2, 8
rng = np.random.default_rng(34)


def repeat_kv(x, n_rep):
  bs, seqlen, n_kv_heads, head_dim = x.shape
  if n_rep == 1: return x
  return x.repeat((1, 1, 1, n_rep)).reshape(bs, seqlen, n_kv_heads * n_rep, head_dim)


xq, = inputs(rng.standard_normal((B, T, NH, D), dtype=np.float32))
xk, xv = inputs(*(rng.standard_normal((B, T, NKV, D), dtype=np.float32) for _ in range(2)))
keys, values = repeat_kv(xk, NH // NKV), repeat_kv(xv, NH // NKV)
q, k, v = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(B, T, NH * D).realize()
