"""A small test file written as tinygrad's own tests are (unittest, Tensor programs that
realize), for tests/interop/test_tinygrad_suite.py: the suite's plugin runs it in a child
pytest. Not collected by the project's own run (its name does not match test_*.py).

  TestSample.test_agree       two realizes whose every graph agrees with the reference
  TestSample.test_nan_times_0 tinygrad folds x*0 to 0 (mul-zero-fold): its tensor graph disagrees
  TestSample.test_shifted     the same program under another test id (a rule by test id)
  TestSample.test_fails       tinygrad's value is realized, then the test itself fails
  TestSample.test_skipped     skipped: no call phase, not counted
  TestSample.test_no_realize  runs, realizes nothing
"""
import unittest
import numpy as np
from tinygrad import Tensor


class TestSample(unittest.TestCase):
  def test_agree(self):
    a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_allclose((a * 2 + 1).sum(axis=1).numpy(), [9.0, 27.0])
    self.assertEqual((a.max() > 4).item(), True)

  def test_nan_times_0(self):
    x = Tensor(np.array([np.nan, 1.0, np.inf], np.float32))
    self.assertEqual((x * 0).tolist(), [0.0, 0.0, 0.0])

  def test_shifted(self):
    x = Tensor(np.array([np.nan, 2.0], np.float32))
    (x * 0).realize()

  def test_fails(self):
    self.assertEqual((Tensor([1, 2]) + 1).tolist(), [0, 0])

  @unittest.skip("never runs")
  def test_skipped(self): (Tensor([1.0]) + 1).realize()

  def test_no_realize(self): self.assertEqual(Tensor([1, 2]).shape, (2,))
