"""The @function decorator: capture a Python function on Tensors as one FUNCTION node.

Calling a decorated f(x, y) follows the Dialect document (spec/sources.yaml) step by step:
  1. extract inputs: walk every argument (nested lists, tuples and dicts, keyword
     arguments too) for Tensors, deduplicated by identity (of their UOp: two Tensors
     over the same hash-consed UOp are one input);
  2. run f lazily on the real Tensors, which builds a UOp graph and executes nothing;
  3. parameterize: substitute PARAM(k) (same shape and dtype, no device) for the k-th
     input's UOp throughout the traced graph (one iterative pass; the bodies of nested
     FUNCTIONs are closed and left alone);
  4. wrap the result(s) in a TUPLE, even a single one, and build FUNCTION(TUPLE, x, y, ...);
  5. return GETTUPLE(FUNCTION, 0), or one GETTUPLE per element when f returns a tuple or list.

PARAMs carry only slot, dtype and shape, so they are canonical: calling f again with
inputs of the same shapes and dtypes builds the very same body (hash-consing), and only
the FUNCTION's arguments differ. Tensors f reads from its closure (not passed as
arguments) stay in the body as they are.
"""
from __future__ import annotations
import functools
from tinyspec.uop import UOp
from tinyspec.frontend.tensor import Tensor
from tinyspec.frontend.nodes import shape_uop
from tinyspec.frontend.walk import substitute


def function(fn):
  @functools.wraps(fn)
  def traced(*args, **kwargs):
    inputs = find_inputs((args, kwargs))                             # 1
    result = fn(*args, **kwargs)                                     # 2
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if not outs or not all(isinstance(o, Tensor) for o in outs):
      raise TypeError(f"@function {fn.__name__} must return a Tensor or a tuple/list of Tensors, not {result!r}"[:300])
    params = {id(u): (u, param(k, u)) for k, u in enumerate(inputs)}
    body = substitute([o.uop for o in outs], params)                 # 3
    f = UOp("FUNCTION", (UOp("TUPLE", tuple(body)),) + tuple(inputs))   # 4
    got = [Tensor(UOp("GETTUPLE", (f,), k)) for k in range(len(outs))]   # 5
    if isinstance(result, tuple): return tuple(got)
    return got if isinstance(result, list) else got[0]
  traced.__wrapped__ = fn
  return traced


def param(k: int, u: UOp) -> UOp:
  """The placeholder for input k: a PARAM with u's shape and dtype."""
  p = u._props
  return UOp("PARAM", (shape_uop(p.shape),), {"slot": k, "dtype": p.dtype})


def find_inputs(tree) -> list[UOp]:
  """The UOps of every Tensor in a nest of lists, tuples and dicts, first appearance
  first, each once (iterative walk)."""
  out, seen = [], set()
  stack = [tree]
  while stack:
    x = stack.pop()
    if isinstance(x, Tensor):
      if id(x.uop) not in seen: seen.add(id(x.uop)); out.append(x.uop)
    elif isinstance(x, dict): stack.extend(reversed(list(x.values())))
    elif isinstance(x, (list, tuple)): stack.extend(reversed(x))
  return out
