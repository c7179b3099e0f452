"""Cross-entropy with label smoothing and an ignored label (sparse_categorical_crossentropy
with ignore_index and label_smoothing), and the accuracy of the argmax."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(49)
logits, = inputs(rng.standard_normal((7, 5), dtype=np.float32))
labels, = inputs(np.array([0, 4, -1, 2, 2, -1, 1], dtype=np.int32))
loss = logits.sparse_categorical_crossentropy(labels, ignore_index=-1, label_smoothing=0.1)
Tensor.realize(loss, (logits.argmax(-1) == labels).float().mean())
