"""Third-party backends bring their manifests, projects their settings (issue 23): a backend
names its manifest in its hello (relative to where its program lives) or as a Backend
attribute; a project's pyproject.toml [tool.tinyspec] gives the backend, the corpus, the
timeout, the profile and per-backend manifests; --manifest wins over all of them."""
from __future__ import annotations
import io
import json
import shutil
import sys
from pathlib import Path
import pytest
from tinyspec.cli import main
from tinyspec.conformance.run.settings import load_settings, SettingsError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "conformance" / "examples" / "python" / "backend.py"


def backend_with_manifest(folder: Path, manifest_text: str | None, named: str = "mine.yaml") -> str:
  """The example backend, ADD computing a - b, naming `named` as its manifest, in folder."""
  folder.mkdir(parents=True, exist_ok=True)
  src = EXAMPLE.read_text().replace('"ADD": lambda s, arg: s[0] + s[1],', '"ADD": lambda s, arg: s[0] - s[1],')
  src = src.replace('"manifest": "manifest.yaml"', f'"manifest": {json.dumps(named)}')
  (folder / "backend.py").write_text(src)
  if manifest_text is not None: (folder / named).write_text(manifest_text)
  return f"cmd:{sys.executable} {folder / 'backend.py'}"


def run(capsys, *argv) -> tuple[int, str, str]:
  rc = main(["conformance", *map(str, argv)])
  out, err = capsys.readouterr()
  return rc, out, err


def test_a_backend_names_its_manifest_beside_it(tmp_path, capsys, monkeypatch):
  backend = backend_with_manifest(tmp_path / "vendor", 'expected_failures:\n  "ADD/*": "a - b (planted)"\n')
  monkeypatch.chdir(tmp_path)   # not where the backend lives
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32", "--case", "ADD/int32")
  assert rc == 0 and "0 passed, 0 failed, 2 expected failures" in out, out + err


def test_the_shipped_example_names_its_own(capsys, monkeypatch, tmp_path):
  monkeypatch.chdir(tmp_path)
  rc, out, err = run(capsys, "--backend", f"cmd:{sys.executable} {EXAMPLE}", "-k", "MAX/float32")
  assert rc == 0 and "1 passed" in out, out + err


def test_which_manifest_wins(tmp_path, capsys, monkeypatch):
  backend = backend_with_manifest(tmp_path / "vendor", 'expected_failures:\n  "ADD/float32": "the backend\'s own"\n')
  (tmp_path / "project.yaml").write_text('exclude:\n  "ADD/float32": "the project\'s"\n')
  (tmp_path / "flag.yaml").write_text('expected_failures: {}\n')
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec.manifests]\nstarter-python = "project.yaml"\n')
  monkeypatch.chdir(tmp_path)
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32", "-v")
  assert rc == 5 and "excluded by the manifest: the project's" in out, out + err   # [tool.tinyspec.manifests] over the backend's
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32", "--manifest", "flag.yaml")
  assert rc == 1 and "1 failed" in out, out + err                                    # --manifest over both


@pytest.mark.parametrize("named, said", [("missing.yaml", "missing.yaml: no such manifest"),
                                         (5, "'manifest': 5 is not of type 'string' [backend.protocol]")])
def test_a_manifest_named_wrongly_is_refused(tmp_path, capsys, named, said):
  backend = backend_with_manifest(tmp_path / "vendor", None, named)
  rc, out, err = run(capsys, "--backend", backend, "--case", "ADD/float32")
  assert rc == 2 and said in err, out + err


def test_a_python_backend_names_its_manifest_relative_to_its_module():
  from tinyspec.backends import Backend
  from tinyspec.conformance.run.worker import serve
  class Mine(Backend):
    name = "mine"
    manifest = "manifests/mine.yaml"
  out = io.StringIO()
  serve(Mine(), io.StringIO('{"cmd": "hello", "protocol": 1}\n'), out)
  hello = json.loads(out.getvalue())
  assert hello["ok"] and hello["manifest"] == str(Path(__file__).resolve().parent / "manifests" / "mine.yaml")


# ------------------------------------------------------------------ [tool.tinyspec]
def test_project_settings_are_used_and_said(tmp_path, capsys, monkeypatch):
  corpus = tmp_path / "cases"
  shutil.copytree(ROOT / "conformance" / "cases" / "ADD" / "int32", corpus / "ADD" / "int32")
  (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.tinyspec]\nbackend = "ref"\ncases = "cases"\n'
                                           'timeout = 30\nprofile = "portable"\n')
  (tmp_path / "sub").mkdir()
  monkeypatch.chdir(tmp_path / "sub")   # found from a folder below
  rc, out, err = run(capsys, "--json", tmp_path / "r.json")
  assert rc == 0 and "1 passed" in out, out + err
  assert f"backend ref (from [tool.tinyspec] of {tmp_path / 'pyproject.toml'})" in err
  assert json.loads((tmp_path / "r.json").read_text())["profile"] == "portable"
  rc, out, err = run(capsys, "--backend", "ref", "--cases", ROOT / "conformance" / "cases", "--case", "ADD/float32")
  assert rc == 0 and "backend ref (from" not in err                 # the command line wins


@pytest.mark.parametrize("text, said", [
  ('[tool.tinyspec]\nbakend = "c"\n', "unknown key 'bakend'; did you mean 'backend'?"),
  ('[tool.tinyspec]\ntimeout = "long"\n', "timeout must be a number"),
  ('[tool.tinyspec]\ntimeout = -1\n', "timeout must be a positive number"),
  ('[tool.tinyspec]\nprofile = "lenient"\n', "profile must be strict or portable"),
  ('[tool.tinyspec.manifests]\nmine = 3\n', "maps backend names to manifest files"),
  ('[tool.tinyspec]\nbackend = \n', "[file.parse]"),
])
def test_bad_project_settings_are_refused(tmp_path, capsys, monkeypatch, text, said):
  (tmp_path / "pyproject.toml").write_text(text)
  monkeypatch.chdir(tmp_path)
  rc, out, err = run(capsys, "--backend", "ref", "--case", "ADD/float32")
  assert rc == 2 and said in err, out + err
  with pytest.raises(SettingsError): load_settings(tmp_path)


def test_a_pyproject_without_the_table_is_passed_over(tmp_path):
  (tmp_path / "pyproject.toml").write_text('[tool.tinyspec]\nbackend = "c"\n')
  (tmp_path / "inner").mkdir()
  (tmp_path / "inner" / "pyproject.toml").write_text('[project]\nname = "inner"\n')
  s = load_settings(tmp_path / "inner")
  assert s.backend == "c" and s.path == tmp_path / "pyproject.toml"
