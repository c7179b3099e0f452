"""The Dialect document's gemm composition, and tinygrad's own matmul of the same operands."""
import numpy as np
from _compositions import gemm, inputs

rng = np.random.default_rng(0)
A, B = inputs(rng.standard_normal((4, 5), dtype=np.float32), rng.standard_normal((5, 3), dtype=np.float32))
gemm(A, B).realize()
(A @ B).realize()
