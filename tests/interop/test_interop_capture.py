"""The capture never changes what tinygrad does, and says what it cannot judge (issue 31,
suite findings S10, S13, S14): small real programs, each run under import_script.

  * TinyJit: realizes inside a JIT capture (where tinygrad forbids Tensor.numpy) are read
    without it; their tensor graphs are judged with the values of the JIT's first run; realizes
    of one capture that touch the same buffers are a limitation with its reason;
  * multi-device tensors: each device's run of a CALL is a kernel graph of its own;
  * NULL-device buffers have no contents: validated, never evaluated, the reason said;
  * bound Variables: the kernels and programs get the variable's value as an input; a
    symbolic shape is never asked for a number;
  * nothing tinygrad left unmade is made: a realized Tensor.empty is never allocated (TinyJit
    would take it for an input: tinygrad's test_jit_init_empty_alt), no Buffer is registered
    for a BUFFER, no view opened; what is left unread says why;
  * DISK tensors: a file tinygrad has not opened is read as its bytes (an input, and a result
    tinygrad has closed again); a value tinygrad refuses to read, or a realize tinygrad aborts,
    is a limitation with its reason, and the capture never raises where tinygrad does not.
"""
import os
import shutil
import numpy as np
import pytest

os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
pytest.importorskip("tinygrad")

from tinyspec.interop.script import import_script   # noqa: E402

JIT = """
from tinygrad import Tensor, TinyJit
@TinyJit
def f(x): return (x * 2 + 1).realize()
for i in range(4):
  assert f(Tensor([1.0, 2.0 + i]).realize()).tolist() == [3.0, 5.0 + 2 * i]
"""
JIT_CHAINED = """
from tinygrad import Tensor, TinyJit
w = Tensor([1.0, 2.0]).contiguous().realize()
@TinyJit
def step(x):
  w.assign(w + x).realize()
  return (w * 3).realize()
for i in range(3): step(Tensor([1.0, 1.0]).realize())
assert w.tolist() == [4.0, 5.0]
"""
MULTI = """
from tinygrad import Tensor, Device
devs = (Device.DEFAULT, Device.DEFAULT + ":1")
t = Tensor([1.0, 2.0, 3.0, 4.0]).shard(devs, axis=0).realize()
assert (t * 2).tolist() == [2.0, 4.0, 6.0, 8.0]
"""
# tinygrad's test/unit/test_multitensor.py::TestMultiTensor::test_clone (replicated: axis None)
MULTI_CLONE = """
from tinygrad import Tensor, Device
devs = (Device.DEFAULT + ":1", Device.DEFAULT + ":2")
t = Tensor.arange(16).reshape(4, 4).clone().shard(devs, axis=None).contiguous().realize()
assert t.clone().realize().tolist() == t.tolist()
"""
NULL = """
from tinygrad import Tensor
t = Tensor.empty(4, 8, device="NULL").realize()
(t.sum(0) * 2).realize()
"""
VARIABLE = """
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import UOp
v = UOp.variable("i", 0, 5)
x = Tensor.ones(10).contiguous().realize()
for n in (3, 5):
  assert Tensor.ones(10, dtype=dtypes.int).contiguous().shrink(((0, v.bind(n)),)).sum().item() == n
  assert (x + Tensor(v.bind(n))).sum().item() == 10 * (1 + n)
"""
SYMBOLIC_SHAPE = """
from tinygrad import Tensor, Device
from tinygrad.uop.ops import UOp
t = Tensor.arange(UOp.variable("s", 1, 128).bind(64)).cumsum().clone(Device.DEFAULT + ":1")
assert t[:64].tolist()[-1] == 2016
"""

# tinygrad's test/unit/test_jit.py::TestJit::test_jit_init_empty_alt: b is never allocated, so
# TinyJit does not take it for an input; read by the capture, it was, and the JIT returned 2, 2, 2
JIT_EMPTY_TARGET = """
from tinygrad import Tensor, TinyJit
@TinyJit
def f(a, b): return b.assign(a + 1)
for i in range(4):
  a = Tensor([i])
  b = Tensor.empty_like(a)
  assert f(a, b).item() == i + 1, (i, "the JIT returned a stale value")
"""
JIT_UNREADABLE = """
from tinygrad import Tensor, TinyJit
from tinygrad.engine.jit import JitError
@TinyJit
def add(a, b):
  Tensor.zeros(4, 4).contiguous().realize()   # nothing outside the JIT holds it: planned into the JIT's arena
  return (a + b).realize()
for i in range(3): assert add(Tensor([i]), Tensor([i])).item() == 2 * i
@TinyJit
def g(a, i): return (a + 1).realize(), i
try:
  for i in range(3): g(Tensor([1.0]), i)
  raise AssertionError("TinyJit took a non-Tensor return")
except JitError: pass   # raised at the capture, before the JIT's first run
"""

# DISK: tinygrad's test/unit/test_disk_tensor.py (test_simple_read, test_write_ones, test_strided_read)
DISK = """
from tinygrad import Tensor, Device, dtypes
open("{d}/f", "wb").write(bytes(range(256)))
t = Tensor.empty(16, 16, device="disk:{d}/f", dtype=dtypes.uint8)
assert t[1].to(Device.DEFAULT).tolist() == list(range(16, 32))
out = Tensor.ones(4, device=Device.DEFAULT).contiguous().to("disk:{d}/g").realize()
assert open("{d}/g", "rb").read() == bytes.fromhex("0000803f") * 4
"""
DISK_REFUSED = """
from tinygrad import Tensor
try:
  Tensor([1, 2]).to("disk:{d}/missing/x").realize()
  raise AssertionError("tinygrad wrote into a missing folder")
except FileNotFoundError: pass
"""
JIT_READS_A_RESULT = """
from tinygrad import Tensor, TinyJit
@TinyJit
def f(x):
  y = (x * 2 + 1).realize()
  return y[1:].realize()   # reads y's buffer, which TinyJit fills only after the capture
for i in range(4): assert f(Tensor([1.0, 2.0, 3.0 + i]).realize()).tolist() == [5.0, 7.0 + 2 * i]
"""
DISK_VIEWS = """
import os, tempfile
from tinygrad import Tensor, dtypes
d = tempfile.mkdtemp()
for name in ("a", "b"):
  with open(os.path.join(d, name), "wb") as f: f.write(bytes(range(10, 24)))
t = Tensor.empty(3, dtype=dtypes.uint, device=f"disk:{os.path.join(d, 'a')}").shrink([(0, 2)])   # tinygrad's test_bitcast_view
assert (t.bitcast(dtypes.uint16).to("CPU") + 1).tolist() == [2827, 3341, 3855, 4369]
u = Tensor.empty(14, dtype=dtypes.uint8, device=f"disk:{os.path.join(d, 'b')}")
assert (u[2:10].to("CPU") * 2).tolist() == [2 * v for v in range(12, 20)]
"""
DISK_STRIDED = """
import os, tempfile
from tinygrad import Tensor
dt = Tensor([0, 1, 2, 3, 4, 5]).to(f"disk:{os.path.join(tempfile.mkdtemp(), 's')}")
dt[::2].realize()   # realized, never read: tinygrad raises only when a strided DISK view is read
try:
  dt[::2].tolist()
  raise AssertionError("tinygrad read a strided DISK view")
except RuntimeError as e: assert "non-contiguous view is not supported" in str(e)   # tinygrad's test_strided_read
"""
TINYFS = """
import hashlib, os, socketserver, threading
from tinygrad import Tensor
from tinygrad.helpers import CHUNK_SIZE
from tinygrad.nn.state import fs_store

class Store(socketserver.StreamRequestHandler):   # a TINYFS server: hashes of what is stored, 16 bytes a chunk
  def handle(self):
    while line := self.rfile.readline().decode().strip():
      if line == "INFO": self.wfile.write(b'{"n": ["n", "%s"]}\\r\\n' % ENDPOINT.encode())
      elif line.startswith("STORE_IN"):
        data = self.rfile.read(int(line.split()[1]))
        self.wfile.write(b"".join(hashlib.md5(data[i:i + CHUNK_SIZE]).digest() for i in range(0, len(data), CHUNK_SIZE)))
      self.wfile.flush()

server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Store)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
os.environ["TINYFS_ENDPOINT"] = ENDPOINT = "127.0.0.1:%d" % server.server_address[1]
h = fs_store(Tensor([1.0, 2.0, 3.0, 4.0])).realize()   # tinygrad's copyout of the whole STORE buffer would fail
data = Tensor([1.0, 2.0, 3.0, 4.0]).numpy().tobytes().ljust(CHUNK_SIZE, bytes(1))
assert h.numpy().tobytes() == hashlib.md5(data).digest()
server.shutdown()
"""


def _run(tmp_path, text: str, name: str):
  p = tmp_path / f"{name}.py"
  p.write_text(text)
  res = import_script(p)
  assert res.error is None, res.error   # the program ran as it does without the capture
  return res


def test_jit_capture_realizes_are_read_without_numpy_and_judged(tmp_path):
  res = _run(tmp_path, JIT, "jit")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  # call 0 runs plainly, call 1 is the JIT capture, calls 2 and 3 replay (no realize): the inputs' realizes and f's two
  assert len(tensors) == 6, [g.name for g in tensors]
  assert all(g.valid and g.eval_ok for g in tensors), [(g.name, g.evaluation) for g in tensors]
  captured = [g for g in tensors if "out0" in g.expected and g.expected["out0"].tolist() == [3.0, 5.0 + 2]]
  assert captured, "the realize inside the JIT capture was not judged against the JIT's first run"


def test_jit_realizes_touching_each_others_buffers_are_a_limitation(tmp_path):
  res = _run(tmp_path, JIT_CHAINED, "jit_chained")
  limited = [g for g in res.graphs if g.evaluation.startswith("unchecked: capture limitation: inside a TinyJit capture")]
  assert limited, [(g.name, g.evaluation) for g in res.graphs]
  assert all(g.valid for g in res.graphs)
  assert all(g.eval_ok for g in res.graphs if g not in limited), [(g.name, g.evaluation) for g in res.graphs if g not in limited]


def test_multi_device_calls_are_judged_per_device(tmp_path):
  res = _run(tmp_path, MULTI, "multi")
  kernels = [g for g in res.graphs if g.level in ("kernel", "program")]
  assert kernels and all(g.valid and g.eval_ok for g in kernels), [(g.name, g.evaluation) for g in kernels]
  devices = {str(n.arg.get("device")) for g in kernels if g.level == "kernel" for n in g.graph.nodes
             if n.op == "PARAM" and isinstance(n.arg, dict) and "device" in n.arg}
  assert len(devices) >= 2, devices   # one kernel graph for each device's run


def test_a_multi_device_buffer_the_realize_allocates_has_its_imported_shape(tmp_path):
  """A replicated buffer's zeros are its shards end to end, the shape the graph declares (not tinygrad's one-shard shape)."""
  res = _run(tmp_path, MULTI_CLONE, "multi_clone")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert tensors and all(g.valid and g.eval_ok for g in tensors), [(g.name, g.evaluation) for g in tensors]
  assert any(a.shape == (32,) for g in tensors for a in g.inputs.values())


def test_null_device_is_a_limitation_with_its_reason(tmp_path):
  res = _run(tmp_path, NULL, "null")
  assert res.graphs and all(g.valid for g in res.graphs)
  for g in res.graphs:
    assert g.evaluation == ("unchecked: capture limitation: a NULL-device buffer has no contents (tinygrad's NULL "
                            "device allocates no memory and runs nothing)"), (g.name, g.evaluation)
    assert not g.eval_ok


def test_bound_variable_values_are_inputs(tmp_path):
  res = _run(tmp_path, VARIABLE, "variable")
  assert all(g.valid and g.eval_ok for g in res.graphs), [(g.name, g.evaluation) for g in res.graphs if not g.eval_ok]
  with_i = [g for g in res.graphs if "i" in g.inputs]
  assert {g.level for g in with_i} >= {"kernel", "program"}
  assert sorted({int(g.inputs["i"]) for g in with_i}) == [3, 5]


def test_symbolic_shape_is_never_asked_for_a_number(tmp_path):
  res = _run(tmp_path, SYMBOLIC_SHAPE, "symbolic_shape")
  assert not any("eval failed to be a single number" in g.evaluation for g in res.graphs)
  kernels = [g for g in res.graphs if g.level != "tensor"]
  assert kernels and all(g.valid and g.eval_ok for g in kernels), [(g.name, g.evaluation) for g in kernels]


def test_a_realized_empty_is_never_allocated_and_tinyjit_computes_as_without_the_capture(tmp_path):
  res = _run(tmp_path, JIT_EMPTY_TARGET, "jit_empty_target")   # the program's own asserts: 1, 2, 3, 4
  from tinyspec.interop.capture import NEVER_ALLOCATED
  inputs_realized = [g for g in res.graphs if g.level == "tensor" and "out1" in g.unread]
  assert len(inputs_realized) == 4, [(g.name, g.unread) for g in res.graphs]   # f's inputs (a, b) realized on each call
  for g in inputs_realized:
    assert g.evaluation.startswith(f"unchecked: tinygrad's out1 could not be read (out1: {NEVER_ALLOCATED}); ok:"), g.evaluation
    assert "out0" in g.expected   # a's value is still judged
  assert all(g.valid for g in res.graphs)


def test_jit_values_that_cannot_be_read_say_why(tmp_path):
  from tinyspec.interop.capture import JIT_ABANDONED, JIT_ARENA
  res = _run(tmp_path, JIT_UNREADABLE, "jit_unreadable")
  limits = {g.evaluation.removeprefix("unchecked: capture limitation: ") for g in res.graphs if "capture limitation" in g.evaluation}
  assert limits == {JIT_ARENA, JIT_ABANDONED}, [(g.name, g.evaluation) for g in res.graphs]
  judged = [g for g in res.graphs if "capture limitation" not in g.evaluation]
  assert judged and all(g.valid and g.eval_ok for g in judged), [(g.name, g.evaluation) for g in judged if not g.eval_ok]


def test_reading_makes_no_buffer_and_opens_no_view():
  from tinygrad import Tensor, dtypes
  from tinygrad.uop.ops import UOp, buffers
  from tinyspec.interop.capture import known_buffer, read_buffer
  unmade = UOp.new_buffer("CPU", 4, dtypes.float)
  assert known_buffer(unmade) is None and unmade not in buffers   # UOp.buffer would make and register one
  x = Tensor([1.0, 2.0, 3.0, 4.0]).contiguous().realize()
  view = x[1:3].uop
  buf = known_buffer(view)
  assert read_buffer(buf).tolist() == [2.0, 3.0]
  assert view not in buffers and not buf.is_initialized() and x.uop.buffer.allocated_views == 0
  empty = Tensor.empty(3).realize()
  assert read_buffer(known_buffer(empty.uop)) is None and not empty.uop.is_realized


def test_disk_files_are_read_as_their_bytes(tmp_path):
  res = _run(tmp_path, DISK.format(d=tmp_path), "disk")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert len(tensors) == 2 and all(g.valid and g.eval_ok and not g.unread for g in tensors), [(g.name, g.evaluation, [str(d) for d in g.diagnostics]) for g in tensors]
  assert sorted(a.tobytes()[:4] for g in tensors for a in g.inputs.values() if a.dtype.itemsize == 1 and a.size == 256) == [bytes(range(4))]
  assert any(g.expected["out0"].tobytes() == bytes.fromhex("0000803f") * 4 for g in tensors)   # the file tinygrad closed again


def test_a_realize_tinygrad_aborts_is_a_limitation_with_its_reason(tmp_path):
  from tinyspec.interop.capture import REALIZE_RAISED
  res = _run(tmp_path, DISK_REFUSED.format(d=tmp_path), "disk_refused")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert [g.name for g in tensors if g.limitation.startswith(f"{REALIZE_RAISED} (FileNotFoundError")] == ["r0.tensor"], \
      [(g.name, g.limitation) for g in tensors]
  assert not (tmp_path / "missing").exists()
def test_tinyfs_buffers_are_not_read_and_the_program_runs_as_without_the_capture(tmp_path):
  res = _run(tmp_path, TINYFS, "tinyfs")   # reading the STORE buffer failed the program (tinygrad's test_tinyfs)
  from tinyspec.interop.capture import TINYFS_DEVICE
  limited = [g for g in res.graphs if g.evaluation == f"unchecked: capture limitation: {TINYFS_DEVICE}"]
  assert limited and all(g.level == "tensor" for g in limited), [(g.name, g.evaluation) for g in res.graphs]
  judged = [g for g in res.graphs if g not in limited]
  assert judged and all(g.valid and g.eval_ok for g in judged), [(g.name, g.evaluation) for g in judged if not g.eval_ok]


def test_a_buffer_whose_read_raises_is_left_unread_with_the_error():
  from tinygrad import Tensor
  from tinyspec.interop.capture import READ_RAISED, Unreadable, known_buffer, read_buffer
  buf = known_buffer(Tensor([1.0, 2.0]).contiguous().realize().uop)

  class Refusing:   # a device whose copyout raises (as TINYFS's does for a STORE buffer read whole)
    def __init__(self, b): self.b = b
    def __getattr__(self, name): return getattr(self.b, name)
    def as_memoryview(self): raise ValueError("memoryview assignment: lvalue and rvalue have different structures")
  got = read_buffer(Refusing(buf))
  assert isinstance(got, Unreadable) and got.reason.startswith(READ_RAISED) and "different structures" in got.reason
  assert read_buffer(buf).tolist() == [1.0, 2.0]


def test_a_jit_realize_reading_a_buffer_an_earlier_one_made_is_a_limitation(tmp_path):
  """Inside a TinyJit capture, y[1:].realize() reads y's buffer, made by the realize before it
  (tinygrad's test_multinomial: a view of the drawn indices). The buffer has no contents yet
  when the realize is made; judged with zeros it disagreed with tinygrad."""
  res = _run(tmp_path, JIT_READS_A_RESULT, "jit_reads_a_result")
  reading = [g for g in res.graphs if g.evaluation.startswith("unchecked: capture limitation: inside a TinyJit capture, it reads a buffer")]
  assert reading, [(g.name, g.evaluation) for g in res.graphs]
  judged = [g for g in res.graphs if "capture limitation" not in g.evaluation]
  assert judged and all(g.valid and g.eval_ok for g in judged), [(g.name, g.evaluation) for g in judged if not g.eval_ok]


def test_a_disk_file_read_through_a_view_is_an_input_with_the_files_bytes(tmp_path):
  """A DISK tensor (Tensor.empty on a file) read at an offset and bitcast: tinygrad opens the
  file only for the copy, so the buffer had no contents when the realize was made; the graph
  reads the file's bytes (what the buffer holds after the realize, which only read it), not
  zeros."""
  res = _run(tmp_path, DISK_VIEWS, "disk_views")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert len(tensors) == 2 and all(g.valid and g.eval_ok for g in tensors), [(g.name, g.evaluation, [d.format() for d in g.diagnostics]) for g in tensors]
  for g in tensors:   # each graph's input is its file's bytes (14 of them; 3 uint32 take 12)
    assert any(np.asarray(a).tobytes()[:12] == bytes(range(10, 22)) for a in g.inputs.values()), (g.name, g.inputs)


def test_a_result_tinygrad_cannot_read_is_left_unread_and_the_program_runs_as_without_the_capture(tmp_path):
  """A strided view of a DISK tensor (tinygrad's test_strided_read): tinygrad raises only when
  the view is read. The capture's own read of the result (Tensor.numpy, inside the realize)
  raised that error out of the realize, and the realize was left with no value and no reason
  ("nothing to compare"); now that value is left unread with tinygrad's error as its reason (the
  realize's other values are still judged), and the error the program sees is its own read's."""
  from tinyspec.interop.capture import READ_RAISED
  res = _run(tmp_path, DISK_STRIDED, "disk_strided")
  unread = [g for g in res.graphs if any(w.startswith(f"{READ_RAISED} (RuntimeError: non-contiguous") for w in g.unread_reasons.values())]
  assert unread and not any(g.limitation for g in unread) and all(g.valid for g in res.graphs), [(g.name, g.evaluation) for g in res.graphs]
