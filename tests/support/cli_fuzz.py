"""A Hypothesis-driven fuzz of the `tinyspec` command line over hostile inputs (the driver
of tests/conformance/test_hostile_fuzz.py; also a script: `python tests/support/cli_fuzz.py --count N`).

Each example is one mutated input, of five kinds:
  graph     a graph file (a corpus graph mutated at the JSON level -- hostile values,
            swapped ops, dropped keys -- or at the byte level, as JSON or YAML) through
            validate, props, show, eval, compile or run;
  npy       a .npy (or .npz) input whose header or data is mutated, through eval or run;
  case      a case folder (case.json, graph, arrays mutated, FIFOs, links to devices and
            folders) run by the conformance runner, many folders per runner call;
  protocol  a line a backend writes (hello, answers: mutated JSON, lines without end,
            outputs outside the run's folder, crashes, hangs), many per runner call;
  option    a command with hostile values for some of its options (every option of every
            subcommand, read from tinyspec's own parsers) and for some TINYSPEC_*
            variables (tinyspec.environment.VARIABLES), on a small valid graph.
Commands run in this process through tinyspec.cli.main (a command that would hang in
native code past its --timeout ends the process through the CLI's watchdog: the parent
sees exit 1 with [run.timeout], counts that input as stopped in time and starts a new
driver after it).

Asserted for every input: no traceback, no exception out of main, an exit code in
{0, 1, 2}, a bounded time, no file written outside the directory given (hostile names
aim at <work>/escape_* and at absolute paths). The driver reports its own peak RSS.
The result is one JSON line on stdout.
"""
from __future__ import annotations
import argparse
import contextlib
import copy
import io
import json
import os
import random
import resource
import shutil
import sys
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_backend.py"
KINDS = (("graph", 59), ("npy", 16), ("case", 13), ("protocol", 8), ("option", 4))   # kind, share in percent
CASE_BATCH, PROTO_BATCH = 100, 50
CMD_TIMEOUT = "10"    # --timeout of every command (seconds)
CASE_TIMEOUT = "5"    # the runner's --timeout per case


# ------------------------------------------------------------------ hostile values
def hostile_names(work: Path) -> list:
  return ["../escape_1", "../../escape_2", "../../../escape_3", str(work / "abs_escape"), "..", ".", "", "a/../../escape_4",
          "escape_5\n", "x" * 200, "\x1b[2J", "out0/../../escape_6", "-rf", ".hidden", "buf0", "param1", "ok_name"]


def hostile_values(work: Path) -> list:
  deep = []
  for _ in range(70): deep = [deep]
  return [0, 1, -1, 2, 0.0, -0.0, 1.0, 0.5, 2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63, 2 ** 64, -(2 ** 63), 10 ** 30, 1e308, -1e308, 1e-320,
          True, False, None, "", "nan", "inf", "-inf", "float32", "int32", "index", "bool", "void", "CPU", "GLOBAL", "LOCAL",
          "gidx0", "gidx0\n", "lidx0", "ADD", "SINK", "x" * 5000, "\x00\x1b[31m\u202e", "999 passed, 0 failed\n",
          [], [0], [1, 1], [2 ** 20, 2 ** 20], [0, 2 ** 40, 2 ** 40], [1] * 65, [3] * 40, [-1], [[]], deep, {}, {"a": deep},
          {"slot": 0.0, "dtype": "float32", "device": "CPU"}, {"value": 1, "dtype": "int32"}, {"op": "ADD"}, [None, True, "x"],
          ] + hostile_names(work)


def hostile_options(work: Path) -> list:
  """Values for any option: numbers at and past every edge, words, JSON, the README's
  spellings, a path inside the directory given (an --out elsewhere is where the user asks)."""
  return ["-1", "0", "1", "2", "-5", "1e9", "1e-9", "nan", "inf", "-inf", "", " ", "99999999999999999999999", "0x10", "3.5", "two",
          "[[]]", "[]", "{}", '[["PADTO", 0, 1e30]]', '[["PADTO", 0, 99999999999999999999999]]', '[["SPLIT", 0, [4, "THREAD"]]]',
          '[["STAGE", 0, 16]]', '[["SWAP", 0, 1]]', '{"E_2": [["UPCAST"]]}', "[null]", "x" * 300, "\x1b[2J", "c", "opencl", "ref",
          "nonexistent", "cmd:false", "table:mi250x", "chain,gated", "nope", "*", "not ADD", str(work / "out" / "e" / "given"),
          "tensor", "kernel", "both", "portable", "strict", "on", "off"]


def hostile_environment(work: Path) -> list:
  """Values for any TINYSPEC_* variable (absolute paths only: a relative cache would be
  the current directory, which the user gave)."""
  return ["", "0", "1", "-1", "1e9", "two", "99999999999999999999999", "reversed", "up", "table:h100", "table:H100", "table:mi250x",
          "table:nope", "table:", "Oclgrind", "99:99", "nope", "lots", "-5G", "1T", "64K", "2G", "-fsanitize=address", "--bogus-flag",
          "-O0", "PYTHON", "CPU", "x" * 300, str(work / "out" / "e" / "cache"), str(work / "in" / "g.json"), "/proc/self", "/dev/null"]


def command_options() -> dict:
  """Subcommand -> [(option string, argparse action)] for every option of tinyspec's
  parsers, read from the parsers themselves."""
  import argparse
  from tinyspec.cli import _commands, _Parser
  sub = _Parser(prog="tinyspec").add_subparsers(dest="cmd", parser_class=_Parser)
  out = {}
  for name, ep in sorted(_commands().items()):
    p, _ = ep.load()(sub)
    out[name] = [(a.option_strings[0], a) for a in p._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
  return out


# ------------------------------------------------------------------ seeds
def _load_json(p: Path):
  try: return json.loads(p.read_text())
  except (OSError, ValueError, RecursionError): return None


def seed_graphs() -> list:
  """Graph documents to mutate: the rule corpus (valid and invalid), the ops' examples and
  a few graphs with named buffers, kernels and programs."""
  out = []
  for p in sorted((ROOT / "conformance" / "rules").rglob("*.json")):
    if p.name.endswith(".expect.json"): continue
    d = _load_json(p)
    if d is not None and len(json.dumps(d)) < 20000: out.append(d)
  from tinyspec.tables import tables
  for op in tables().ops.values():
    if op.example: out.append([dict(n) for n in op.example])
  b = lambda shape, slot=0, name=None, dt="float32": [{"op": "VCONST", "arg": {"values": list(shape), "dtype": "index"}},
                                                      {"op": "BUFFER", "src": [0], "arg": {"slot": slot, "dtype": dt, "device": "CPU", **({"name": name} if name else {})}}]
  out.append(b((2,), name="named") + [{"op": "ADD", "src": [1, 1]}, {"op": "STORE", "src": [1, 2]}])
  out.append(b((4, 3)) + [{"op": "REDUCE", "src": [1], "arg": {"op": "ADD", "axes": [0]}}])
  out.append(b((2,)) + [{"op": "NEG", "src": [1]}])
  return out


def seed_cases() -> list:
  """Small corpus case folders to mutate."""
  base = ROOT / "conformance" / "cases"
  names = ["NEG/float32", "ADD/int32", "MAX/float16", "CAST/bfloat16", "REDUCE/float32", "negative/graph.src/invalid-forward",
           "negative/file.parse/invalid-truncated", "WHERE/int8"]
  return [base / n for n in names if (base / n / "case.json").exists()]


# ------------------------------------------------------------------ mutations (Hypothesis)
def strategies(work: Path):
  from hypothesis import strategies as st
  values = st.sampled_from(hostile_values(work)).map(copy.deepcopy)   # a copy: the mutations write into what they insert
  graphs = seed_graphs()

  @st.composite
  def json_mutation(draw, doc):
    """Replace, delete or add something at a random place of a JSON document."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
      holder, key = _pick(draw, doc)
      if holder is None: return draw(values)
      what = draw(st.sampled_from(["replace", "replace", "replace", "delete", "op", "dup"]))
      if what == "delete" and isinstance(holder, dict): holder.pop(key, None)
      elif what == "op" and isinstance(holder, dict):
        from tinyspec.tables import tables
        holder["op"] = draw(st.sampled_from(sorted(tables().ops) + ["FROB", "add"]))
      elif what == "dup" and isinstance(holder, list) and holder: holder.insert(draw(st.integers(0, len(holder))), holder[key])
      else:
        if isinstance(holder, list) and not holder: holder.append(draw(values))
        else: holder[key] = draw(values)
    return doc

  @st.composite
  def graph_file(draw):
    doc = draw(st.sampled_from(graphs))
    if draw(st.booleans()): doc = draw(json_mutation(doc))
    fmt = draw(st.sampled_from(["json", "json", "json", "yaml"]))
    text = json.dumps(doc) if fmt == "json" else _yaml(doc, draw)
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 3)) == 0: data = _byte_mutation(draw, data)
    return fmt, data

  @st.composite
  def npy_file(draw):
    return draw(st.sampled_from(["npy", "npy", "npy", "npz"])), _npy_mutation(draw)

  @st.composite
  def case_folder(draw):
    return draw(st.sampled_from(seed_cases())), draw(st.randoms(use_true_random=False)).getrandbits(32), draw(json_mutation(
      {"format": "tinyspec-case", "version": 1, "kind": "positive", "graph": "graph.json", "inputs": {}, "outputs": {}}))

  @st.composite
  def protocol_line(draw):
    return draw(st.sampled_from(PROTO_KINDS)), draw(st.integers(0, 2 ** 16))

  options = command_options()
  opt_values = st.sampled_from(hostile_options(work))

  @st.composite
  def option_call(draw):
    """(command, [(option, value or None for a flag)], {variable: value})"""
    cmd = draw(st.sampled_from(sorted(options)))
    picked = []
    for flag, action in draw(st.lists(st.sampled_from(options[cmd]), max_size=3, unique_by=lambda fa: fa[0])) if options[cmd] else []:
      if action.nargs == 0: picked.append((flag, None))
      elif action.choices and draw(st.booleans()): picked.append((flag, str(draw(st.sampled_from(sorted(map(str, action.choices)))))))
      else: picked.append((flag, draw(opt_values)))
    env = draw(st.dictionaries(st.sampled_from(sorted(environment_variables())), st.sampled_from(hostile_environment(work)), max_size=2))
    return cmd, picked, env

  return {"graph": graph_file(), "npy": npy_file(), "case": case_folder(), "protocol": protocol_line(), "option": option_call()}


def environment_variables() -> tuple:
  from tinyspec.environment import VARIABLES
  return VARIABLES


def _pick(draw, doc):
  """(a container in doc, a key or index in it) chosen by walking down a few levels."""
  from hypothesis import strategies as st
  holder, key = None, None
  cur = doc
  for _ in range(draw(st.integers(1, 5))):
    if isinstance(cur, dict) and cur:
      k = draw(st.sampled_from(sorted(cur)))
      holder, key, cur = cur, k, cur[k]
    elif isinstance(cur, list) and cur:
      i = draw(st.integers(0, len(cur) - 1))
      holder, key, cur = cur, i, cur[i]
    else: break
  return holder, key


def _yaml(doc, draw) -> str:
  import yaml
  from hypothesis import strategies as st
  text = yaml.safe_dump(doc, default_flow_style=draw(st.booleans()))
  extra = draw(st.sampled_from(["", "", "- &a {op: CONST}\n- *a\n", "x: !!python/object:os.system {}\n", "v: 0x" + "f" * 500 + "\n",
                                "v: 1:2:3:4:5:6:7:8:9\n", "- !!binary AAAA\n", "a: " + "[" * 300 + "\n"]))
  return text + extra


def _byte_mutation(draw, data: bytes) -> bytes:
  from hypothesis import strategies as st
  data = bytearray(data)
  for _ in range(draw(st.integers(1, 4))):
    how = draw(st.sampled_from(["flip", "cut", "insert", "dup"]))
    at = draw(st.integers(0, max(len(data) - 1, 0)))
    if how == "flip" and data: data[at] = draw(st.integers(0, 255))
    elif how == "cut": del data[at:at + draw(st.integers(1, 64))]
    elif how == "insert": data[at:at] = draw(st.sampled_from([b"[", b"{", b"]", b"}", b",", b'"', b"\\", b"\x00", b"\xff\xfe", b"[" * 2000,
                                                              b"9" * 450, b"-", b"1e999", b"NaN", b"\n"]))
    else: data[at:at] = data[at:at + draw(st.integers(1, 128))]
  return bytes(data)


def _npy_mutation(draw) -> bytes:
  """A .npy file (1-d float32 of 2 elements in the fuzz's graph) with its header or data mutated."""
  from hypothesis import strategies as st
  shape = draw(st.sampled_from(["(2,)", "(2,)", "()", "(1099511627776,)", "(0, 1099511627776, 1099511627776)", "(-1,)",
                                "(" + "1," * 70 + ")", "(2, 1)", "(100000000,)", "(2,", "'x'", "(2.0,)"]))
  descr = draw(st.sampled_from(["'<f4'", "'<f4'", "'>f4'", "'<f8'", "'|O'", "[('a', '<f4'), ('b', '<i4')]", "'<c8'", "'|V2'", "'<U3'",
                                "'garbage'", "'<i4'", "'|b1'", "('<f4', (2,))"]))
  fortran = draw(st.sampled_from(["False", "True", "'x'"]))
  header = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"
  header += " " * (-(len(header) + 11) % 64) + "\n"
  version = draw(st.sampled_from([b"\x01\x00", b"\x01\x00", b"\x02\x00", b"\x09\x09"]))
  hlen = len(header)
  if draw(st.integers(0, 5)) == 0: hlen = draw(st.sampled_from([0, 1, 65535, hlen + 7]))
  size = (b"<H" if version == b"\x01\x00" else b"<I")
  import struct
  head = b"\x93NUMPY" + version + struct.pack(size.decode(), hlen) + header.encode("latin1")
  data = draw(st.sampled_from([b"\x00" * 8, b"\x00" * 8, b"", b"\x00" * 3, b"\x00\x00\x80\x7f" * 2, b"\xff" * 64]))
  out = head + data
  if draw(st.integers(0, 4)) == 0: out = _byte_mutation(draw, out)
  return out


# ------------------------------------------------------------------ running one input
class Fuzz:
  def __init__(self, work: Path):
    self.work = work
    for d in ("in", "out", "cwd", "cases", "proto"): (work / d).mkdir(parents=True, exist_ok=True)
    (work / "stats.json").unlink(missing_ok=True)
    self.stats = {"inputs": 0, "by_kind": {}, "exits": {}, "max_seconds": 0.0, "failures": []}
    self.pending = {"case": [], "protocol": []}
    self.n = 0

  # -- bookkeeping
  def record(self, kind: str, rc, text: str, seconds: float, what: str, count: int = 1):
    st = self.stats
    st["inputs"] += count
    st["by_kind"][kind] = st["by_kind"].get(kind, 0) + count
    st["exits"][str(rc)] = st["exits"].get(str(rc), 0) + count
    st["max_seconds"] = max(st["max_seconds"], seconds)
    st.setdefault("seconds_by_kind", {})[kind] = round(st.get("seconds_by_kind", {}).get(kind, 0) + seconds, 2)
    bad = []
    if rc not in (0, 1, 2, 5): bad.append(f"exit {rc}")   # 5: a conformance run in which no case ran
    if "Traceback (most recent call last)" in text: bad.append("a traceback")
    if seconds > 60: bad.append(f"{seconds:.0f} s")
    escaped = self.escapes()
    if escaped: bad.append(f"wrote outside its directory: {escaped}")
    if bad: st["failures"].append({"kind": kind, "what": what[:300], "problems": bad, "output": text[-1500:]})

  def escapes(self) -> list:
    w = self.work
    out = [str(p) for p in w.iterdir() if p.name not in ("in", "out", "cwd", "cases", "proto", "proto-cases", "progress", "stats.json")]
    out += [str(p) for p in (w / "cwd").iterdir()]
    out += [str(p) for p in (w / "out").iterdir() if p.name != "e"]
    out += [str(p) for p in w.parent.glob("escape*")]
    return out

  def cli(self, argv: list, cwd: Path | None = None) -> tuple:
    """main(argv) in this process, in `cwd` (default the empty work/cwd that nothing may
    write to): (exit code, stdout + stderr, seconds); an exception out of main is a traceback."""
    from tinyspec.cli import main
    buf = io.StringIO()
    t0 = time.monotonic()
    old = os.getcwd()
    os.chdir(cwd or self.work / "cwd")
    try:
      with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try: rc = main(argv, owns_process=True) if _OWNS else main(argv)
        except SystemExit as e: rc = e.code if isinstance(e.code, int) else 2
        except BaseException as e:   # noqa: BLE001 -- anything out of main is the failure being hunted
          import traceback
          rc = f"exception {type(e).__name__}"
          buf.write("Traceback (most recent call last):\n" + traceback.format_exc())
    finally:
      os.chdir(old)
    return rc, buf.getvalue(), time.monotonic() - t0

  def fresh_out(self) -> Path:
    d = self.work / "out" / "e"
    shutil.rmtree(self.work / "out", ignore_errors=True)
    d.mkdir(parents=True)
    return d

  # -- the kinds
  def run(self, item, index: int) -> None:
    """One input; `index` counts the examples drawn (a driver started again after this one
    begins past it). The progress file says where it is; every 100 inputs the statistics
    are saved (a driver ended by the watchdog keeps what it did)."""
    kind, data = item
    self.n += 1
    (self.work / "progress").write_text(json.dumps({"index": index, "kind": kind}))
    getattr(self, f"run_{kind}")(data)
    if self.n % 100 == 0: self.save()

  def save(self):
    st = dict(self.stats)
    st["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    st["children_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    (self.work / "stats.json").write_text(json.dumps(st))

  def run_graph(self, data):
    fmt, raw = data
    f = self.work / "in" / f"g.{fmt}"
    f.write_bytes(raw)
    out = self.fresh_out()
    r = random.Random(zlib.crc32(raw))
    cmd = r.choice([["validate", str(f)], ["validate", "--json", str(f)], ["props", str(f)], ["props", "--json", str(f)],
                    ["eval", str(f), "--out", str(out)], ["eval", str(f), "--trace", "--out", str(out / "t.npz")],
                    ["eval", str(f), "--out", str(out)], ["compile", str(f), "--dump-stages", str(out)],
                    ["run", str(f), "--backend", "ref", "--out", str(out)], ["run", str(f), "--backend", "c", "--out", str(out)],
                    ["show", str(f), "-o", str(out / "g.svg")], ["show", str(f), "--limit", "0", "-o", str(out / "g.html")]])
    rc, text, secs = self.cli(cmd + (["--timeout", CMD_TIMEOUT] if _OWNS else []))
    self.record("graph", rc, text, secs, " ".join(cmd) + " <- " + repr(raw[:300]))

  def run_npy(self, data):
    ext, raw = data
    g = self.work / "in" / "neg.json"
    if not g.exists():
      g.write_text(json.dumps([{"op": "VCONST", "arg": {"values": [2], "dtype": "index"}},
                               {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}}, {"op": "NEG", "src": [1]}]))
    x = self.work / "in" / f"x.{ext}"
    if ext == "npz":
      with zipfile.ZipFile(x, "w") as z: z.writestr("buf0.npy", raw)
      arg = str(x)
    else:
      x.write_bytes(raw); arg = f"buf0={x}"
    out = self.fresh_out()
    cmd = random.Random(zlib.crc32(raw)).choice([["eval", str(g), "--input", arg, "--out", str(out)], ["run", str(g), "--backend", "ref", "--input", f"buf0={x}"],
                                           ["run", str(g), "--backend", "c", "--input", f"buf0={x}"]])
    rc, text, secs = self.cli(cmd + (["--timeout", CMD_TIMEOUT] if _OWNS else []))
    self.record("npy", rc, text, secs, " ".join(cmd) + " <- " + repr(raw[:200]))

  def run_option(self, data):
    cmd, picked, env = data
    g = self.work / "in" / "small.json"
    if not g.exists(): g.write_text(json.dumps(SMALL_GRAPH))
    out = self.fresh_out()
    base = {"validate": [str(g)], "props": [str(g)], "show": [str(g), "-o", str(out / "g.svg")], "eval": [str(g), "--out", str(out)],
            "compile": [str(g)], "run": [str(g), "--backend", "c", "--out", str(out)],
            "conformance": ["--backend", "ref", "-k", "NEG/float32", "--junit", str(out / "j.xml")],
            "fuzz": ["--backend", "ref", "--examples", "2", "--out", str(out / "f")], "docs": ["--out", str(out / "docs")],
            "import-tinygrad": [str(self.work / "in" / "missing.py"), "--out", str(out / "t")],
            "new-backend": [str(out / "nb"), "--lang", "c"], "case": ["new", str(g), str(out / "case")]}.get(cmd, [])
    argv = [cmd] + base
    for flag, value in picked: argv += [flag] if value is None else [flag, value]
    if _OWNS and cmd in ("validate", "props", "show", "eval", "compile", "run"): argv += ["--timeout", CMD_TIMEOUT]   # the last one counts
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try: rc, text, secs = self.cli(argv, cwd=out)     # (a relative path an option names is the user's: inside out)
    finally:
      for k, v in saved.items():
        if v is None: os.environ.pop(k, None)
        else: os.environ[k] = v
      from tinyspec.compiler.device import device
      device.cache_clear()     # (a device read under the drawn variables)
    self.record("option", rc, text, secs, " ".join(f"{k}={v!r}" for k, v in env.items()) + " tinyspec " + " ".join(map(repr, argv)))

  def run_case(self, data):
    self.pending["case"].append(data)
    if len(self.pending["case"]) >= CASE_BATCH: self.flush_cases()

  def run_protocol(self, data):
    self.pending["protocol"].append(data)
    if len(self.pending["protocol"]) >= PROTO_BATCH: self.flush_protocol()

  def flush(self):
    self.flush_cases(); self.flush_protocol()

  def flush_cases(self):
    items, self.pending["case"] = self.pending["case"], []
    if not items: return
    root = self.work / "cases"
    shutil.rmtree(root, ignore_errors=True); root.mkdir()
    for k, (src, bits, mut) in enumerate(items): make_case(root / f"c{k:04d}", src, bits, mut, self.work)
    out = self.fresh_out()
    verify = [] if len(items) % 2 or not _OWNS else ["--no-verify"]
    cmd = ["conformance", "--backend", "ref", "--cases", str(root), "--timeout", CASE_TIMEOUT, "--junit", str(out / "j.xml"),
           "--json", str(out / "r.json")] + verify
    rc, text, secs = self.cli(cmd)
    self.record("case", rc, text, secs, f"{len(items)} case folders", count=len(items))
    junit = out / "j.xml"
    if junit.exists():
      import xml.etree.ElementTree as ET
      try: ET.parse(junit)
      except ET.ParseError as e: self.stats["failures"].append({"kind": "case", "what": "JUnit", "problems": [f"XML that does not parse: {e}"], "output": ""})

  def flush_protocol(self):
    items, self.pending["protocol"] = self.pending["protocol"], []
    if not items: return
    d = self.work / "proto"
    shutil.rmtree(d, ignore_errors=True); d.mkdir()
    (d / "script.json").write_text(json.dumps([[k, s] for k, s in items]))
    (d / "next").write_text("0")
    out = self.fresh_out()
    backend = f"cmd:{sys.executable} -S -E {FAKE} script {d} {self.work}"
    used = 0
    while used < len(items):   # until the backend has written every line (a refused hello ends a run early)
      cases = self.proto_cases(len(items) - used)
      cmd = ["conformance", "--backend", backend, "--cases", str(cases), "--timeout", "0.5", "--junit", str(out / "j.xml")]
      rc, text, secs = self.cli(cmd)
      now = min(int((d / "next").read_text() or 0), len(items))
      if now == used:   # the run never reached the backend: a failure of its own, and the lines are spent
        now = len(items)
        self.stats["failures"].append({"kind": "protocol", "what": "a conformance run that started no backend", "problems": [f"exit {rc}"],
                                       "output": text[-1500:]})
      self.record("protocol", rc, text, secs, f"protocol lines {used}..{now}: {[k for k, _ in items][used:now]}", count=now - used)
      used = now

  def proto_cases(self, n: int) -> Path:
    """n copies of one small case, one run each (the fake backend answers each run with a
    line): as many runs as lines are left to write."""
    d = self.work / "proto-cases"
    shutil.rmtree(d, ignore_errors=True)
    src = ROOT / "conformance" / "cases" / "NEG" / "float32"
    meta = json.loads((src / "case.json").read_text())
    for k in range(n):
      f = d / f"p{k:03d}"
      f.mkdir(parents=True)
      for p in src.iterdir():
        if p.name != "case.json": os.link(p, f / p.name)
      (f / "case.json").write_text(json.dumps({**meta, "id": f"proto/{k:03d}"}))
    return d


SMALL_GRAPH = [{"op": "VCONST", "arg": {"values": [3, 5], "dtype": "index"}},
               {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
               {"op": "REDUCE", "src": [1], "arg": {"op": "ADD", "axes": [1]}}]


def _owns() -> bool:
  """Whether tinyspec.cli.main takes owns_process (a tinyspec from before it is fuzzed as it is)."""
  import inspect
  from tinyspec.cli import main
  return "owns_process" in inspect.signature(main).parameters


_OWNS = _owns()


def make_case(folder: Path, src: Path, bits: int, mut: dict, work: Path):
  """A copy of corpus case `src` with one of its parts made hostile."""
  r = random.Random(bits)
  shutil.copytree(src, folder)
  meta = json.loads((folder / "case.json").read_text())
  if meta.get("graph", "").startswith(".."): meta["graph"] = str((src / meta["graph"]).resolve())
  files = sorted(p.name for p in folder.iterdir() if p.name != "case.json") + ["case.json"]
  victim = folder / r.choice(files)
  how = r.choice(["meta", "meta", "meta", "replace-meta", "fifo", "devzero", "dir", "garbage", "truncate", "missing", "list", "deep", "id"])
  if how == "meta":
    for k, v in mut.items():
      if r.random() < 0.3: meta[k] = v
    (folder / "case.json").write_text(json.dumps(meta))
  elif how == "replace-meta": (folder / "case.json").write_text(json.dumps(mut))
  elif how == "list": (folder / "case.json").write_text("[1, 2]")
  elif how == "deep": (folder / "case.json").write_text("[" * 100000 + "]" * 100000)
  elif how == "id":
    meta["id"] = r.choice(["\x1b[2J\x1b[H999 passed, 0 failed", "a\nPASS x", "]]><x", "\x00", "../../x", "\ud800"])
    (folder / "case.json").write_text(json.dumps(meta))
  else:
    (folder / "case.json").write_text(json.dumps(meta))
    if how == "fifo": victim.unlink(); os.mkfifo(victim)
    elif how == "devzero": victim.unlink(); victim.symlink_to("/dev/zero")
    elif how == "dir": victim.unlink(); victim.mkdir()
    elif how == "garbage": victim.write_bytes(bytes(r.getrandbits(8) for _ in range(64)))
    elif how == "truncate": victim.write_bytes(victim.read_bytes()[:r.randrange(1, 40)] if victim.stat().st_size else b"")
    elif how == "missing": victim.unlink()


# ------------------------------------------------------------------ protocol lines
# the kinds of line the fake backend (tests/support/fake_backend.py, mode `script`) writes, by
# weight (a hang costs the runner's --timeout and a line without end 17 MB through a
# pipe: those are rarer)
PROTO_KINDS = (["ok"] * 30 + ["refuse"] * 8 + ["outputs-outside"] * 8 + ["outputs-bad"] * 8 + ["garbage", "not-object", "deep", "crash",
               "stderr-escapes", "huge-error", "rule-number", "two-lines", "empty-line"] * 4 + ["no-newline-long"] * 2
               + ["hang", "hello-bad-caps", "hello-bad-name", "hello-refuse"])


# ------------------------------------------------------------------ driving
def drive(count: int, seed: int, work: Path, start: int = 0) -> dict:
  """count inputs, each kind its share of KINDS (one Hypothesis run per kind); the first
  `start` are drawn but not run (a driver started again after one that ended)."""
  from hypothesis import given, settings, seed as hseed, HealthCheck, Phase
  fz = Fuzz(work)
  strats = strategies(work)
  seen = [0]
  for kind, share in KINDS:
    n = count * share // 100

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strats[kind])
    def one(item):
      seen[0] += 1
      if seen[0] > start: fz.run((kind, item), seen[0])

    if n: one()
    fz.flush()
  fz.stats["examples"] = seen[0]
  fz.save()
  return json.loads((work / "stats.json").read_text())


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--count", type=int, default=1000)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--start", type=int, default=0, help="skip the first examples (a driver started again after one)")
  ap.add_argument("--work", type=Path, required=True)
  a = ap.parse_args(argv)
  a.work.mkdir(parents=True, exist_ok=True)
  st = drive(a.count, a.seed, a.work, a.start)
  print(json.dumps(st))
  return 0


if __name__ == "__main__":
  sys.exit(main())
