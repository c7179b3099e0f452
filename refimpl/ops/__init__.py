"""The units, one module per op family; importing this package registers them all."""
from tinyspec.refimpl.ops import elementwise, decomposed, threefry, cast, source, movement, reduce, call, memory, kernel, multi  # noqa: F401
