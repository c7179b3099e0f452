"""The numbers in spec/decompositions.yaml are what their comments say they are: derived
constants equal tools/decomp_constants.py's derivation, bit-layout parameters agree with
dtypes.yaml, Cody-Waite parts are short enough for exact products, and the published
LOG2 coefficients approximate their function."""
from fractions import Fraction
import numpy as np
import pytest
from tinyspec.dtypes import dtype as D
from tinyspec.decompose import templates

from conftest import tool

C = tool("decomp_constants")

DERIVED = C.constants()
FLOATS = ("float32", "float64")


def params(tpl, dt): return templates()[tpl]["params"][dt]


@pytest.mark.parametrize("dt", FLOATS)
def test_derived_constants_match_their_derivation(dt):
  d = DERIVED[dt]
  assert params("exp2", dt)["poly"] == d["exp2_poly"]
  s = params("sin", dt)
  assert (s["sin_poly"], s["cos_poly"], s["two_over_pi"], s["pio2"]) == (d["sin_poly"], d["cos_poly"], d["two_over_pi"], d["pio2"])
  lg = params("log2", dt)
  assert (lg["ivln2hi"], lg["ivln2lo"]) == (d["ivln2hi"], d["ivln2lo"])


@pytest.mark.parametrize("dt", FLOATS)
def test_bit_layout_follows_dtypes_yaml(dt):
  t = D(dt)
  e, l = params("exp2", dt), params("log2", dt)
  assert e["mant"] == l["mant"] == t.mantissa
  assert e["bias"] == 2 ** (t.exponent - 1) - 1
  assert D(e["int"]).itemsize == D(l["int"]).itemsize == t.itemsize and D(e["int"]).cls == "int"
  npf = np.dtype(t.np).type
  assert l["tiny"] == float(np.finfo(npf).tiny)
  assert float(np.finfo(npf).smallest_subnormal) * l["scale"] >= l["tiny"]   # every denormal times scale is normal
  assert l["unscale"] == -np.log2(l["scale"])
  assert np.array(l["sqrt_half"], np.uint64).astype(t.np.replace("float", "uint")).view(npf) == npf(np.sqrt(0.5))
  # exp2's clamps: 2^hi overflows, 2^lo is below half the smallest denormal
  smallest = -(e["bias"] - 1 + t.mantissa)   # log2 of the smallest denormal
  assert e["hi"] >= 2 ** (t.exponent - 1) and e["lo"] < smallest - 1


@pytest.mark.parametrize("dt,nmax", [("float32", 2 ** 16), ("float64", 2 ** 20)])
def test_cody_waite_parts(dt, nmax):
  """n * part is exact for every |n| < nmax (the domain's quotients), and the parts sum to
  pi/2 closely enough for the worst case within the domain (r ~ 4e-9 at x = 252.898 for
  float32, r ~ 6e-19 at x = 45.553 for float64: 64 and 120 more bits)."""
  parts = params("sin", dt)["pio2"]
  mant = {"float32": 24, "float64": 53}[dt]
  for p in parts[:-1]:
    f = abs(Fraction(p))
    while f.denominator != 1: f *= 2
    m = int(f)
    significant = m.bit_length() - ((m & -m).bit_length() - 1)   # bits from the leading to the last 1
    assert significant + (nmax - 1).bit_length() <= mant, p
  err = abs(sum(map(Fraction, parts)) - C.PI / 2)
  assert err < Fraction(1, 2 ** {"float32": 64, "float64": 150}[dt])
  assert abs(Fraction(params("sin", dt)["two_over_pi"]) - 2 / C.PI) < Fraction(1, 2 ** (mant + 1))


def test_log2_coefficients_approximate_their_function():
  """R(z) with z = s^2 approximates (log((1+s)/(1-s)) - 2s)/s on |s| <= 3 - 2*sqrt(2): its
  error in log(1+f) is far below half an ulp of each dtype."""
  L = np.longdouble
  s = np.linspace(L(1e-6), L(0.1716), 20001, dtype=L)
  z = s * s
  want = (np.log1p(2 * s / (1 - s)) - 2 * s) / s
  for dt, bound in (("float32", 2.0 ** -30), ("float64", 2.0 ** -58)):
    acc = np.zeros_like(z)
    for c in params("log2", dt)["lg"]: acc = acc * z + L(c)
    rel = np.max(np.abs(z * acc - want) * s / (2 * s))
    assert rel < bound, (dt, float(rel))


def test_threefry_rotations_are_random123s():
  steps = templates()["threefry2x32"]["steps"]
  rots = [s["with"]["rot"] for s in steps if s.get("use") == "threefry_round"]
  assert rots == [13, 15, 26, 6, 17, 29, 16, 24] * 2 + [13, 15, 26, 6]
  assert all(s["with"]["rot"] + s["with"]["unrot"] == 32 for s in steps if s.get("use") == "threefry_round")
  injections = [(s["src"][2:], s["with"]["s"]) for s in steps if s.get("use") == "threefry_inject"]
  ks = ["k0", "k1", "k2"]
  assert injections == [([ks[i % 3], ks[(i + 1) % 3]], i) for i in range(1, 6)]
