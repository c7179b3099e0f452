"""refimpl.numeric.broadcast_shape: NumPy's broadcasting rule without np.broadcast_shapes's
limit of 32 dimensions (a value carries one axis per loop of its kernel; tinygrad's winograd
backward kernels have 39 loops)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from tinyspec.refimpl.numeric import broadcast_shape

dims = st.lists(st.sampled_from([1, 1, 2, 3]), max_size=5)


@given(st.lists(dims, min_size=1, max_size=4))
def test_agrees_with_numpy_where_numpy_can(shapes):
  try:
    want = np.broadcast_shapes(*map(tuple, shapes))
  except ValueError:
    with pytest.raises(ValueError): broadcast_shape(*map(tuple, shapes))
    return
  assert broadcast_shape(*map(tuple, shapes)) == want


def test_more_than_32_dimensions():
  a, b = (1,) * 38 + (4,), (2,) + (1,) * 38
  with pytest.raises(RuntimeError): np.broadcast_shapes(a, b)   # the limit this replaces
  assert broadcast_shape(a, b) == (2,) + (1,) * 37 + (4,)
  assert (np.ones(a) + np.ones(b)).shape == broadcast_shape(a, b)   # NumPy's arithmetic itself takes them
