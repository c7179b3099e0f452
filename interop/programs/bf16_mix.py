"""A bfloat16 mix: a*b + c in bfloat16 (the PYTHON device's lowered program computes it as
an explicit MULACC of exact operands, whose fused and wide results decision mulacc-rounding
allows), and a float32 computation of bfloat16 operands cast back. clang before 17 has no
__bf16, so on the CPU device this uses tinygrad's own emulation (EMULATED_DTYPES=bfloat16)."""
import numpy as np
from tinygrad import Device, dtypes
from tinygrad.helpers import EMULATED_DTYPES
from _compositions import inputs

if Device.DEFAULT == "CPU": EMULATED_DTYPES.value = ",".join(dict.fromkeys([*filter(None, EMULATED_DTYPES.value.split(",")), "bfloat16"]))
rng = np.random.default_rng(6)
a, b, c = (t.cast(dtypes.bfloat16).realize() for t in inputs(*(rng.standard_normal(16).astype(np.float32) for _ in range(3))))
(a * b + c).realize()
(a.cast(dtypes.float32) * 2 + c.float()).cast(dtypes.bfloat16).realize()
