"""FUNCTION, CALL, TUPLE, GETTUPLE: functions by substitution. A FUNCTION (or a CALL of a
TUPLE body) evaluates its body with PARAM k bound to argument k; nested functions are
evaluated the same way when their node is reached. A CALL of a kernel (a SINK, or a
PROGRAM's LINEAR) runs the kernel with its PARAM k as argument k's storage and writes
what the kernel stored back into those arguments (in place: new versions of them)."""
from __future__ import annotations
from tinyspec.refimpl.unit import unit


@unit("FUNCTION", "CALL", raw=True, role="call", alloc=0)
def call(ctx): return ctx.s.call(ctx)


@unit("TUPLE", alloc=0)
def tuple_(ctx, *xs): return tuple(xs)


@unit("GETTUPLE", alloc=0)
def gettuple(ctx, t): return t[ctx.arg]
