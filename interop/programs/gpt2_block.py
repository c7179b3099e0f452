"""A GPT-2 transformer block as tinygrad's examples/gpt2.py writes it, at toy size: pre-
LayerNorm, causal multi-head self-attention (one fused qkv projection split by heads),
a GELU MLP, two residuals."""
import numpy as np
from tinygrad.nn import LayerNorm, Linear
from _compositions import inputs

B, T, C, H = 1, 4, 16, 2
rng = np.random.default_rng(31)
ln_1, ln_2 = LayerNorm(C), LayerNorm(C)
c_attn, c_proj, c_fc, mlp_proj = Linear(C, 3 * C), Linear(C, C), Linear(C, 4 * C), Linear(4 * C, C)
for layer in (c_attn, c_proj, c_fc, mlp_proj):
  layer.weight, layer.bias = inputs(rng.standard_normal(layer.weight.shape, dtype=np.float32) * 0.2,
                                    rng.standard_normal(layer.bias.shape, dtype=np.float32) * 0.1)
x, = inputs(rng.standard_normal((B, T, C), dtype=np.float32))


def attention(x):
  qkv = c_attn(x).reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)   # (3, B, H, T, D)
  q, k, v = qkv[0], qkv[1], qkv[2]
  y = q.scaled_dot_product_attention(k, v, is_causal=True)
  return c_proj(y.transpose(1, 2).reshape(B, T, C))


h = x + attention(ln_1(x))
(h + mlp_proj(c_fc(ln_2(h)).gelu())).realize()
