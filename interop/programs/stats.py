"""Statistics: mean, variance (Bessel's correction), standard deviation, max and logsumexp."""
import numpy as np
from _compositions import inputs

x, = inputs(np.random.default_rng(9).standard_normal((6, 9)).astype(np.float32))
x.mean(axis=1).realize()
x.var(axis=0).realize()
x.std().realize()
x.max(axis=1).realize()
x.logsumexp(axis=1).realize()
