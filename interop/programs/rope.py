"""Rotary position embeddings as tinygrad's LLaMA (extra/models/llama.py) applies them: the
frequencies are computed from constants only (a tensor on no device), the query and key
rotated as complex pairs."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

B, T, H, D = 1, 4, 2, 8
rng = np.random.default_rng(32)


def precompute_freqs_cis(dim, end, theta=10000.0):
  freqs = 1.0 / (theta ** (Tensor.arange(0, dim, 2)[:(dim // 2)] / dim))
  freqs = Tensor.arange(end).unsqueeze(dim=1) * freqs.unsqueeze(dim=0)
  return Tensor.stack(freqs.cos(), freqs.sin(), dim=-1).reshape(1, end, 1, dim // 2, 2)


def complex_mult(A, c, d):
  a, b = A[..., 0:1], A[..., 1:2]
  return (a * c - b * d).cat(a * d + b * c, dim=-1)


def apply_rotary_emb(xq, xk, freqs_cis):
  xq, xk = xq.reshape(*xq.shape[0:-1], -1, 2), xk.reshape(*xk.shape[0:-1], -1, 2)
  c, d = freqs_cis[..., 0:1], freqs_cis[..., 1:2]
  return complex_mult(xq, c, d).flatten(3), complex_mult(xk, c, d).flatten(3)


xq, xk = inputs(*(rng.standard_normal((B, T, H, D), dtype=np.float32) for _ in range(2)))
Tensor.realize(*apply_rotary_emb(xq, xk, precompute_freqs_cis(D, T)))
