"""Stage 8, render: a linearized kernel becomes C or OpenCL C source.

Everything op-specific comes from spec/render.yaml: per-op cases (`ops`), per-dtype
value/storage types and conversions (`dtypes`), helper functions (`helpers`), and the
targets' preludes. Nothing from the graph is pasted into the source except numbers
formatted here and names generated here.

  cases.py    which render.yaml case a node takes; types and literals per target
  base.py     the Renderer both targets share: the walk, names, values, elementwise ops
  instr.py    one handler per instruction (a tinyspec.dispatch Registry)
  memory.py   addresses, bounds guards, reads, stores, streaming stores, atomics
  launch.py   which ranges run in parallel: work items (OpenCL), threaded slices (C)
  c.py, opencl.py   what each target does its own way (attributes and a few methods)

Vectors: a (k,)-shaped value (expand's UPCAST lanes) is a C vector-extension or OpenCL
vector variable. Pointers are `restrict` when the pipeline says no two PARAMs share
memory (C compilers then vectorize loops without aliasing checks).
"""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.uop import UOp
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.analysis.contract import Guard
from tinyspec.compiler.render.cases import TARGETS, PREDICATES, fill, value_type, storage_type, literal, select_case
from tinyspec.compiler.render.base import KernelSource, Renderer, assemble, launch_size
from tinyspec.compiler.render.c import CRenderer
from tinyspec.compiler.render.opencl import OpenCLRenderer

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)

RENDERERS = {"c": CRenderer, "opencl": OpenCLRenderer}


def render(linear: UOp, name: str, target: str, allow_untrusted: bool = False, noalias: bool = False, kind: str | None = None,
           contract: int = 0, stream_bytes: int | None = None) -> KernelSource:
  """contract: the kernel's REG accumulators are all REDUCEs' (compiled from a tensor
  graph), each summing at most this many elements: their ADD updates of a product may
  fuse (render.yaml `contract`; 0: never). Where some may fuse only when a scan of the
  buffers they read proves it at launch, the kernel gets a fused variant `NAME_fused`
  in the same source and a `guard` (compiler/analysis/contract.py) that picks it.
  stream_bytes: outputs at least this big that the kernel never reads are written with
  streaming stores (render.yaml `streaming`; None: never)."""
  if target not in RENDERERS: raise CompileError("compile.unsupported", f"unknown target {target!r}")
  ks, guards = _render_one(linear, name, target, allow_untrusted, noalias, kind, contract, stream_bytes, False)
  if not guards: return ks
  fused, _ = _render_one(linear, ks.name + "_fused", target, allow_untrusted, noalias, kind, contract, stream_bytes, True)
  ks.guard = Guard(fused.name, tuple(dict.fromkeys(guards)))
  ks.fused_body = fused.body
  ks.helpers = tuple(dict.fromkeys(ks.helpers + fused.helpers))
  ks.exts = tuple(dict.fromkeys(ks.exts + fused.exts))
  ks.source = assemble([ks], target)
  return ks


def _render_one(linear, name, target, allow_untrusted, noalias, kind, contract, stream_bytes, fuse_guarded) -> tuple:
  r = RENDERERS[target](allow_untrusted, noalias, kind, contract, stream_bytes, fuse_guarded)
  # an INDEX is a read where something other than a STORE target or a LOAD uses it
  uses: dict[UOp, bool] = {}
  for u in linear.src:
    for k, s in enumerate(u.src):
      if s.op not in ("INDEX", "AFTER"): continue
      as_addr = (u.op in WRITES and k == 0) or (u.op == "LOAD" and k == 0 and s.op == "INDEX") or u.op in ("IF", "ENDIF") or (u.op == "AFTER" and k == 0)
      uses[s] = uses.get(s, False) or not as_addr
  r._value_uses = uses
  return r.render(linear, name), r.guards


__all__ = ["TARGETS", "PREDICATES", "RENDERERS", "KernelSource", "Renderer", "CRenderer", "OpenCLRenderer", "render", "assemble",
           "launch_size", "fill", "value_type", "storage_type", "literal", "select_case"]
