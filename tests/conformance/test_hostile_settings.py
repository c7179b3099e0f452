"""NUL and other control characters in every setting (issue 32: a NUL in [tool.tinyspec]
backend gave `ValueError: embedded null byte` tracebacks in conformance and in the pytest
plugin's collection): every command-line argument of every command, every [tool.tinyspec]
text, every option and ini key of the pytest plugin (rule setting.value) and every
TINYSPEC_* variable (rule env.value) is refused with a clear message naming it and the
character, exit 2, before anything runs; never a traceback."""
from __future__ import annotations
import argparse
import os
import subprocess
import sys
from pathlib import Path
import pytest
from hostile import cli, ROOT

CHARS = ["\x00", "\x01", "\t", "\n", "\x1b[2J", "\x7f", "\x85", "\u202e"]
GRAPH = ROOT / "conformance" / "cases" / "NEG" / "float32" / "graph.json"


def every_argument() -> list:
  """(command, option string or None for a positional) of every registered command."""
  from tinyspec.cli import _commands
  parser = argparse.ArgumentParser()
  sub = parser.add_subparsers(dest="cmd")
  out = []
  for name, ep in sorted(_commands().items()):
    ep.load()(sub)
    for act in sub.choices[name]._actions:
      if isinstance(act, argparse._HelpAction): continue
      if act.option_strings and act.nargs == 0: continue    # a flag takes no text
      out.append((name, act.option_strings[0] if act.option_strings else None))
  return out


def test_every_option_of_every_command_refuses_control_characters():
  args = [(c, o) for c, o in every_argument() if o]
  assert len({c for c, _ in args}) >= 10 and len(args) >= 50, args
  for k, (cmd, opt) in enumerate(args):
    ch = CHARS[k % len(CHARS)]
    value = f"x{ch}y"
    for argv in ([cmd, opt, value], [cmd, f"{opt}={value}"]) if opt.startswith("--") else ([cmd, opt, value],):
      rc, text = cli(*argv)
      assert rc == 2 and "[setting.value]" in text and opt in text and f"U+{ord(ch[0]):04X}" in text, (argv, text)


def test_a_file_argument_is_not_a_setting(tmp_path):
  """A hostile file name is named escaped (as tests/show/test_hostile_show.py has it), not
  refused as a setting: every command that takes one."""
  extra = {"compile": ["--target", "c"], "import-tinygrad": ["--out", str(tmp_path / "o")], "new-backend": ["--lang", "c"]}
  cmds = sorted({cmd for cmd, opt in every_argument() if opt is None})
  assert {"validate", "props", "show", "eval", "compile", "run", "import-tinygrad"} <= set(cmds), cmds
  for cmd in cmds:
    rc, text = cli(cmd, "no\x1bsuch\n.json", *extra.get(cmd, []))
    assert rc == 2 and "[setting.value]" not in text and "\x1b" not in text and r"no\x1bsuch" in text, (cmd, text)


@pytest.mark.parametrize("ch", CHARS[1:], ids=[f"U+{ord(c[0]):04X}" for c in CHARS[1:]])
def test_every_environment_variable_refuses_control_characters(ch, monkeypatch):
  """(The OS keeps a NUL out of the environment.)"""
  from tinyspec.environment import VARIABLES
  for name in VARIABLES:
    monkeypatch.setenv(name, f"x{ch}y")
    rc, text = cli("validate", GRAPH)
    assert rc == 2 and f"{name}=" in text and "[env.value]" in text and f"U+{ord(ch[0]):04X}" in text, (name, text)
    monkeypatch.delenv(name)


def pyproject(folder: Path, key: str, text: str) -> Path:
  """A pyproject.toml whose [tool.tinyspec] `key` holds text (TOML escapes: any character)."""
  quoted = '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or c in '"\\' else c for c in text) + '"'
  if key == "manifests.name": body = f'backend = "ref"\n[tool.tinyspec.manifests]\n{quoted} = "m.yaml"\n'
  elif key == "manifests.file": body = f'backend = "ref"\n[tool.tinyspec.manifests]\nref = {quoted}\n'
  else: body = f"{key} = {quoted}\n"
  (folder / "pyproject.toml").write_text("[tool.tinyspec]\n" + body)
  return folder


@pytest.mark.parametrize("key", ["backend", "cases", "profile", "manifests.name", "manifests.file"])
def test_every_pyproject_text_refuses_control_characters(key, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  for ch in CHARS:
    pyproject(tmp_path, key, f"cmd:./a{ch}b" if key == "backend" else f"a{ch}b")
    rc, text = cli("conformance", "-k", "NEG/float32")
    assert rc == 2 and "[setting.value]" in text and key.split(".")[0] in text and f"U+{ord(ch[0]):04X}" in text, (key, repr(ch), text)


def _pytest(folder: Path, *args) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--pyargs", "tinyspec.conformance",
                         "-q", "-k", "NEG/float32", *args], capture_output=True, text=True, timeout=300, cwd=folder,
                        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.mark.parametrize("where", ["pyproject", "ini", "option", "environment"])
def test_the_pytest_plugin_refuses_control_characters(where, tmp_path):
  """Its collection error names the setting (pytest exits 2 before running a case)."""
  args = []
  if where == "pyproject": pyproject(tmp_path, "backend", "cmd:./a\x00b")
  elif where == "ini": (tmp_path / "pytest.ini").write_text("[pytest]\ntinyspec_backend = r\x01f\n")
  elif where == "option": args = [f"--tinyspec-cases={tmp_path}/c\x1bd"]
  r = _pytest(tmp_path, *args) if where != "environment" else \
      subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "--pyargs", "tinyspec.conformance", "-q"],
                     capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "TINYSPEC_CACHE": "x\ny"})
  text = r.stdout + r.stderr
  assert r.returncode in (2, 4) and "Traceback" not in text and "embedded null byte" not in text, text
  assert ("[env.value]" if where == "environment" else "[setting.value]") in text, text
