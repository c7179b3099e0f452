"""A cumsum over 1000 floats (tinygrad splits it over threads on its CPU device: the
runtime's core_id), and views of the realized result: an offset slice, a strided slice, a
transpose and an offset slice of a reshape (tinygrad realizes a contiguous one as a view
into the same buffer)."""
import numpy as np
from _compositions import inputs

x, = inputs(np.random.default_rng(7).standard_normal(1000).astype(np.float32))
c = x.cumsum().realize()
c[10:20].realize()
c[::7].realize()
c.reshape(40, 25).T.realize()
c.reshape(40, 25)[3:5].realize()
