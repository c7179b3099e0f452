"""Top-k sampling with a seed, as an LLM's decode loop does it: temperature, the k largest
logits, softmax over them, a multinomial draw (tinygrad's RNG: its counter is assigned in
the realize that draws), the token id gathered from the top-k indices."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

Tensor.manual_seed(1337)
rng = np.random.default_rng(37)
logits, = inputs(rng.standard_normal((2, 32), dtype=np.float32) * 3)
values, indices = (logits / 0.8).topk(5)
choice = values.softmax(-1).multinomial()
indices.gather(-1, choice).realize()
