"""Cross-entropy of logits against integer labels (log_softmax and a gather of the label's entry)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(19)
logits, = inputs(rng.standard_normal((6, 5), dtype=np.float32))
labels, = inputs(rng.integers(0, 5, 6, dtype=np.int32))
logits.sparse_categorical_crossentropy(labels).realize()
