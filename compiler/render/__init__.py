"""Stage 8, render: a linearized kernel becomes C or OpenCL C source.

Everything op-specific comes from spec/render.yaml: per-op cases (`ops`), per-dtype
value/storage types and conversions (`dtypes`), helper functions (`helpers`), and the
targets' preludes. Nothing from the graph is pasted into the source except numbers
formatted here and names generated here.

  cases.py    which render.yaml case a node takes; types and literals per target
  facts.py    what a kernel is, computed once before printing (read-only)
  base.py     the Renderer both targets share: the walk, names, values, elementwise ops
  instr.py    one handler per instruction (a tinyspec.dispatch Registry)
  memory.py   addresses, bounds guards, reads, stores, streaming stores, atomics
  launch.py   which ranges run in parallel: work items (OpenCL), threaded slices (C): a Launch
  c.py, opencl.py   what each target does its own way (attributes and a few methods)

Vectors: a (k,)-shaped value (expand's UPCAST lanes) is a C vector-extension or OpenCL
vector variable. Pointers are `restrict` when the pipeline says no two PARAMs share
memory (C compilers then vectorize loops without aliasing checks). What to fuse and which
outputs stream the decide stage has written into the LINEAR (compiler/passes/decide.py):
the renderer prints, it does not decide.
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.analysis.contract import Guard
from tinyspec.compiler.render.cases import TARGETS, DTYPE_FIELD, PREDICATES, fill, value_type, storage_type, literal, select_case
from tinyspec.compiler.render.base import KernelSource, Renderer, assemble, launch_size
from tinyspec.compiler.render.c import CRenderer
from tinyspec.compiler.render.opencl import OpenCLRenderer


RENDERERS = {"c": CRenderer, "opencl": OpenCLRenderer}


def render(linear: UOp, name: str, target: str, allow_untrusted: bool = False, noalias: bool = False, kind: str | None = None,
           guard: tuple = ()) -> KernelSource:
  """The kernel's source, as the decide stage (compiler/passes/decide.py) tagged its LINEAR:
  updates tagged fused are fused multiply-adds, outputs tagged stream get streaming stores.
  guard: the updates (compiler/analysis/contract.py Update) that only a launch-time scan
  proves; when there are any, the kernel gets a fused variant `NAME_fused` in the same
  source (the updates tagged guarded fused too) and a Guard that picks it at launch."""
  if target not in RENDERERS: raise CompileError("compile.unsupported", f"unknown target {target!r}")
  ks = RENDERERS[target](allow_untrusted, noalias, kind).render(linear, name)
  if not guard: return ks
  fused = RENDERERS[target](allow_untrusted, noalias, kind, fuse_guarded=True).render(linear, ks.name + "_fused")
  ks.guard = Guard(fused.name, tuple(dict.fromkeys(guard)))
  ks.fused_body = fused.body
  ks.helpers = tuple(dict.fromkeys(ks.helpers + fused.helpers))
  ks.exts = tuple(dict.fromkeys(ks.exts + fused.exts))
  ks.source = assemble([ks], target)
  return ks


__all__ = ["TARGETS", "DTYPE_FIELD", "PREDICATES", "RENDERERS", "KernelSource", "Renderer", "CRenderer", "OpenCLRenderer", "render", "assemble",
           "launch_size", "fill", "value_type", "storage_type", "literal", "select_case"]
