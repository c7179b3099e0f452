"""Integer division of signed values both ways: floor (//, %: tinygrad's FLOORDIV/FLOORMOD,
the spec's IDIV/MOD) and truncating (div(rounding_mode="trunc"), fmod: tinygrad's
CDIV/CMOD, imported through the cdiv/cmod templates of interop/tinygrad_map.yaml)."""
import numpy as np
from tinygrad import Tensor
from _compositions import inputs

a, b = inputs(np.array([7, -7, 7, -7, 0, 5, -1], dtype=np.int32), np.array([2, 2, -2, -2, 3, 1, 4], dtype=np.int32))
Tensor.realize(a // b, a % b, a.div(b, rounding_mode="trunc"), a.fmod(b))
