"""Runtimes: compile rendered kernels, cache the results on disk, and run them.

`c`      : the system C compiler builds a shared library per kernel, loaded with ctypes;
           a kernel's THREAD axis runs its slices on a thread pool (ctypes releases the GIL).
`opencl` : pyopencl on whatever platform is present (PoCL on a CPU), device chosen with
           TINYSPEC_OPENCL_DEVICE ("platform_index:device_index" or a name substring).
Both cache compiled programs under $TINYSPEC_CACHE (default ~/.cache/tinyspec), keyed by
a hash of the source text and the build options; PoCL's own cache is pointed there too.
"""


class BuildError(RuntimeError):
  """A kernel did not build (the compiler's message, or a timeout), on either runtime."""
