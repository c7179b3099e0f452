"""tinygrad's calls where they are not the spec's (the map table's forms `call` and `index`'s
reshaped buffer), written with the spec's ops.

  * `Tensor.callify` (tinygrad 0.14) makes the realize one CALL whose body is a SINK of
    tensor-level assigns into its PARAMs (AFTER(P, STORE(P, COPY(P')))...), not a kernel:
    the spec's CALL of a SINK is a kernel. Its meaning is the body with each PARAM k
    replaced by argument k: the stores into the argument buffers, a GROUP of them (the
    values that read a stored buffer are ordered by their AFTERs already).
  * A precompiled function's kernel (`@function(precompile=True)`) indexes a RESHAPE of a
    PARAM with one index per axis, which tinygrad's lowering linearizes; the spec's kernels
    have no RESHAPE (a tensor-level op): INDEX(PARAM, the row-major flat index).

Each form is a generator of the importer's walk (interop/tinygrad_import.py): it yields
(source, context) and receives the node index back; cv is the importer's converter.
"""
from __future__ import annotations
from tinyspec.interop.tinygrad_contexts import V


def call(cv, u, ctx):
  """CALL: of a SINK of tensor-level assigns (Tensor.callify), the stores it makes into its
  arguments; any other CALL, the plain form (a kernel SINK, a TUPLE, a PROGRAM)."""
  body = u.src[0]
  if cv.level != "tensor" or body.op.name != "SINK" or not _tensor_level(body):
    return (yield from cv.plain_form(u, ctx))
  cv.report.forms["CALL of a tensor-level SINK (callify) inlined"] += 1
  args = u.src[1:]
  new = {}
  for v in body.toposort():
    if v.op.name == "PARAM" and getattr(v.arg, "slot", -1) in range(len(args)): new[v] = args[v.arg.slot]
    elif v.op.name in ("CALL", "FUNCTION"): new[v] = v.replace(src=(v.src[0], *(new[s] for s in v.src[1:])))   # its body: its own PARAMs
    else: new[v] = v.replace(src=tuple(new[s] for s in v.src)) if v.src else v
  stores = []
  for s in new[body].src:
    for dep in (s.src[1:] if s.op.name == "AFTER" else (s,)): stores.append((yield dep, V()))
  return cv.add("GROUP", stores)


def _tensor_level(sink) -> bool:
  """A SINK with no RANGE and no INDEX: tensor-level assigns, not a kernel."""
  return not any(v.op.name in ("RANGE", "INDEX") for v in sink.toposort())


def reshaped_dims(cv, u) -> tuple | None:
  """For INDEX(RESHAPE(B, dims), i_0..i_k-1) in a kernel: dims (B is what is indexed, by
  `flat_index`); None for any other INDEX."""
  view = u.src[0]
  if cv.level == "tensor" or view.op.name != "RESHAPE": return None
  dims = cv.shape_of(view)
  return dims if dims and len(dims) == len(u.src) - 1 else None


def flat_index(cv, dims, idx: list) -> int:
  """The row-major flat index of the per-axis indices idx (node indices) into shape dims."""
  cv.report.forms["INDEX of a RESHAPE as a flat INDEX"] += 1
  flat = idx[0]
  for d, i in zip(dims[1:], idx[1:]):
    flat = cv.add("ADD", (cv.add("MUL", (flat, cv.const(d, "index"))), i))
  return flat
