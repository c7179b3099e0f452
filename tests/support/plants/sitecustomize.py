"""Planted bugs, one per class of issue 12, for tests/conformance/test_fuzz_sanitize.py: Python loads
this module at start-up when its folder is on PYTHONPATH, and $TINYSPEC_PLANT names the
bug to plant in the fuzzer's sanitized child (the compiler as it was before the fix).

  literal    the simplifier folds (x // c1) // c2 into x // (c1*c2) with the product
             reduced into the dtype (as the C literal truncated it)
  gate-wrap  gate facts narrow x + c ignoring that it wraps
  sizes      symbolic sizes are not checked before launching
  parallel   every axis counts as conflict-free (a THREAD axis the graph names is kept)
  call-const a CONST size argument is realized into a buffer the launch reads as 0
  call-const-buffer  every CONST argument is passed by value, also to a buffer PARAM
and one per class of issue 21:
  pad-partial  a padded output is copied back whole though the kernel stores only part of it
  pad-gather   an input is padded to the reach of every index, a gathered one's dtype range too
  contract     every REDUCE(ADD) of products is fused, whatever its operands' intervals
and of issue 24 (the launch-time guard of a fused kernel):
  contract-guard  the fused variant runs whatever its operands' buffers hold
  scan-tail       the magnitude scan skips the elements after its last whole vector
and of issue 32:
  scan-int        the guard scans an integer buffer (read through a CAST to float) as floats
  alias        a kernel's arguments that share memory are neither snapshotted nor copied
  view-store   the executor binds a view's base a second time (its stores are lost) and
               reads no output back through a view
"""
import os

PLANT = os.environ.get("TINYSPEC_PLANT")


def _literal():
  from tinyspec.uop import UOp
  from tinyspec.compiler.analysis import symbolic as S
  from tinyspec.props import props
  def div_div(x, a, c1, c2):
    v1, v2 = int(c1.arg["value"]), int(c2.arg["value"])
    if v1 < 1 or v2 < 1 or not S._is_intlike(x): return None
    return UOp("IDIV", (a, S.const(S.wrap(v1 * v2, props(x).dtype), props(x).dtype)))
  from tinyspec.rewrite import Rule
  S.RULES.rules = [Rule(r.name, r.pat, div_div) if r.fn is S.div_div else r for r in S.RULES.rules]
  S.RULES.by_op.clear()


def _gate_wrap():
  from tinyspec.compiler.analysis import bounds as B
  from tinyspec.props import props
  def interval(i, known):
    lo, hi = props(i).min_max
    f = known.get(i)
    if f is None and known:
      lf = B.linear(i, 4)
      if lf is not None and len(lf[0]) == 1:
        (x, k), = lf[0].items()
        if k == 1 and x in known:
          xlo, xhi = props(x).min_max
          flo, fhi = known[x]
          if flo is not None: xlo = max(xlo, flo)
          if fhi is not None: xhi = min(xhi, fhi)
          return (max(lo, xlo + lf[1]), min(hi, xhi + lf[1]))
    if f is not None:
      if f[0] is not None: lo = max(lo, f[0])
      if f[1] is not None: hi = min(hi, f[1])
    return lo, hi
  B.interval = interval
  from tinyspec.compiler.render import memory as M
  M.interval = interval   # (the renderer's own check of an access reads the same facts)


def _sizes():
  from tinyspec.compiler import executor as E
  E.check_size = lambda name, v, lo, hi: None


def _parallel():
  from tinyspec.compiler.passes import optimize as O
  O.conflict_free = lambda sink, r, acc=None: True


def _call_const():
  from tinyspec.compiler.passes import rangeify as R
  from tinyspec.compiler import executor as E
  from tinyspec.compiler.schedule import Kernel
  R._size_slots = lambda body: set()
  def call_kernel(self, c):
    args = [self._storage_of(a) if self._storage_of(a) is not None else self.realized[a] for a in c.src[1:]]
    self.kernels.append(Kernel(c.src[0], args, R._kernel_sink_slots(c.src[0]), f"user_kernel{len(self.kernels)}"))
  R.Rangeify.call_kernel = call_kernel
  launch = E.Executable._launch
  E.Executable._launch = lambda self, prog, k, args, v, computed, threads: launch(self, prog, k, args, v, {}, threads)


def _call_const_buffer():
  from tinyspec.compiler.passes import rangeify as R
  R._size_slots = lambda body: {u.arg["slot"] for u in R._walk(body) if u.op == "PARAM"}


def _pad_partial():
  from tinyspec.compiler.passes import layout as L
  L._covers = lambda ii, shape: True


def _pad_gather():
  from tinyspec.compiler.passes import layout as L
  L._of_loops = lambda i: True


def _contract():
  from tinyspec.compiler.analysis import contract as C
  C.Update.cannot_overflow = lambda self, largest=None: True


def _contract_guard():
  from tinyspec.compiler.analysis import contract as C
  C.Guard.holds = lambda self, largest: True


def _scan_tail():
  from tinyspec.compiler.runtime import magnitude as M
  assert "for (; i < hi; i++)" in M.C_SOURCE
  M.C_SOURCE = M.C_SOURCE.replace("for (; i < hi; i++)", "for (; 0 && i < hi; i++)")


def _scan_int():
  import inspect
  import textwrap
  from tinyspec.compiler.analysis import contract as C
  src = textwrap.dedent(inspect.getsource(C.magnitude))
  test = ' and _dt(props(u).dtype).cls == "float"'
  assert test in src
  exec(compile(src.replace(test, ""), "<planted magnitude>", "exec"), C.__dict__)


def _alias():
  from tinyspec.compiler.passes import snapshots as H
  H.ALIASES = ()


def _replace_in(cls, name: str, old: str, new: str):
  """cls.name recompiled from its source with `old` replaced by `new`."""
  import inspect
  import textwrap
  import sys
  src = textwrap.dedent(inspect.getsource(getattr(cls, name)))
  assert old in src, (name, old)
  scope: dict = {}
  exec(compile(src.replace(old, new), f"<planted {name}>", "exec"), sys.modules[cls.__module__].__dict__, scope)
  setattr(cls, name, scope[name])


def _view_store():
  from tinyspec.compiler import executor as E
  _replace_in(E.Executable, "bind", "elif u not in handles:", "else:")
  _replace_in(E.Bound, "outputs", "a = _view_base(k.args[slot])[0]", "a = k.args[slot]")


if PLANT:
  {"literal": _literal, "gate-wrap": _gate_wrap, "sizes": _sizes, "parallel": _parallel, "call-const": _call_const,
   "call-const-buffer": _call_const_buffer, "pad-partial": _pad_partial, "pad-gather": _pad_gather, "contract": _contract,
   "contract-guard": _contract_guard, "scan-tail": _scan_tail, "scan-int": _scan_int, "alias": _alias, "view-store": _view_store}[PLANT]()
