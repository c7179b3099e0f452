"""refimpl.storage.strided: a strided view of a flat buffer, for every dtype of the tables."""
import numpy as np
import pytest
from tinyspec.intervals import NUMPY_TYPES
from tinyspec.refimpl.storage import strided


@pytest.mark.parametrize("name", sorted(NUMPY_TYPES))
def test_a_strided_view_reads_every_dtype_of_the_table(name):
  """The extended floats (ml_dtypes' bfloat16 and float8s, which NumPy's as_strided cannot
  name) are viewed through their bits and back: same dtype, same bytes as a slice."""
  flat = np.arange(13).astype(NUMPY_TYPES[name])
  view = strided(flat, 1, (2, 3), (6 * flat.itemsize, 2 * flat.itemsize), writeable=False)
  assert view.dtype == flat.dtype
  want = np.ascontiguousarray(flat[1:].reshape(2, 6)[:, ::2])
  assert np.ascontiguousarray(view).tobytes() == want.tobytes()


def test_a_writeable_view_writes_through():
  flat = np.zeros(6, NUMPY_TYPES["float8_e4m3"])
  strided(flat, 0, (3,), (2 * flat.itemsize,), writeable=True)[...] = np.float32(1.5)
  assert flat.astype(np.float32).tolist() == [1.5, 0, 1.5, 0, 1.5, 0]
