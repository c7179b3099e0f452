"""Image preprocessing on uint8 pixels: to float, scaled to [0, 1], normalized per channel
with ImageNet's mean and std, NHWC to NCHW; and a grayscale of weighted channels."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

rng = np.random.default_rng(41)
img, = inputs(rng.integers(0, 256, (2, 5, 6, 3), dtype=np.uint8))
w, = inputs(np.array([0.299, 0.587, 0.114], dtype=np.float32))
mean, std = Tensor([0.485, 0.456, 0.406]), Tensor([0.229, 0.224, 0.225])
Tensor.realize(((img.float() / 255 - mean) / std).permute(0, 3, 1, 2), (img.float() * w).sum(-1))
