"""Two steps of greedy decoding with tied embeddings: embed the token, a residual MLP, logits
against the embedding matrix, log_softmax, argmax as the next token."""
import numpy as np
from tinygrad import Tensor
from tinygrad.nn import Embedding, Linear
from _compositions import inputs

V, C = 12, 8
rng = np.random.default_rng(45)
wte = Embedding(V, C)
wte.weight, = inputs(rng.standard_normal((V, C), dtype=np.float32))
fc = Linear(C, C)
fc.weight, fc.bias = inputs(rng.standard_normal((C, C), dtype=np.float32) * 0.5, np.zeros(C, dtype=np.float32))
tok, = inputs(np.array([[3]], dtype=np.int32))
for _ in range(2):
  h = wte(tok)
  h = h + fc(h).gelu()
  logp = (h @ wte.weight.T).log_softmax(-1)
  tok = logp.argmax(-1).realize()
  logp.max(-1).realize()
