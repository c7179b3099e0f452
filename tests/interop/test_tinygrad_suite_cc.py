"""scripts/bf16-cc.sh picks the C compiler of tinygrad's CPU backend for the suite: one that
compiles __bf16 ($CC or clang, else clang-19 ... clang-15, else clang-19 installed as root with
apt-get), and says which and why in one line. The choices run against fake compilers (shell
scripts that accept or refuse the probe) on a PATH of their own, so they hold on any host;
one last check runs the probe on the host's real compilers, where it has them."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bf16-cc.sh"
BASH = shutil.which("bash")
ACCEPTS = "#!/bin/sh\nwhile read -r _; do :; done\nexit 0\n"   # reads the probe from stdin, compiles it
REFUSES = "#!/bin/sh\nwhile read -r _; do :; done\necho '__bf16 is not supported on this target' >&2\nexit 1\n"
# apt-get installs clang-19: a fake that writes an accepting clang-19 into its folder (@BIN@) and logs its arguments
APT_GET = ("#!/bin/sh\necho \"$@\" >> @BIN@/apt-get.log\n"
           "[ \"$1\" = update ] || { printf '%s' \"$ACCEPTS\" > @BIN@/clang-19; chmod +x @BIN@/clang-19; }\n")


def _bin(tmp_path, uid: int = 1000, **tools) -> Path:
  """A PATH folder holding uname and chmod (the real ones), id (a fake saying uid) and the given fakes."""
  d = tmp_path / "bin"
  d.mkdir()
  for real in ("uname", "chmod"): (d / real).symlink_to(shutil.which(real))
  tools["id"] = f"#!/bin/sh\necho {uid}\n"
  for name, text in tools.items():
    (d / name.replace("_", "-")).write_text(text.replace("@BIN@", str(d)))
    (d / name.replace("_", "-")).chmod(0o755)
  return d


def _pick(path: Path, **env):
  return subprocess.run([BASH, str(SCRIPT)], env={"PATH": str(path), "ACCEPTS": ACCEPTS, **env},
                        capture_output=True, text=True, timeout=60)


def test_the_default_clang_is_kept_where_it_compiles_bf16(tmp_path):
  p = _pick(_bin(tmp_path, clang=ACCEPTS, clang_19=ACCEPTS))
  assert (p.returncode, p.stdout.strip()) == (0, "clang")
  assert p.stderr.strip() == "tinygrad's CPU backend compiles with clang (it compiles __bf16)"


def test_a_newer_clang_on_path_is_picked_where_the_default_refuses(tmp_path):
  p = _pick(_bin(tmp_path, clang=REFUSES, clang_19=REFUSES, clang_17=ACCEPTS, clang_16=ACCEPTS))
  assert (p.returncode, p.stdout.strip()) == (0, "clang-17")   # the newest that compiles it
  assert p.stderr.strip() == "tinygrad's CPU backend compiles with clang-17 (clang does not compile __bf16)"


def test_cc_is_tried_first(tmp_path):
  p = _pick(_bin(tmp_path, mycc=ACCEPTS, clang_19=ACCEPTS), CC="mycc")
  assert p.stdout.strip() == "mycc"
  p = _pick(tmp_path / "bin", CC="no-such-cc")
  assert p.stdout.strip() == "clang-19" and "no-such-cc does not compile __bf16" in p.stderr


def test_clang_19_is_installed_as_root_with_apt_get(tmp_path):
  d = _bin(tmp_path, uid=0, clang=REFUSES, apt_get=APT_GET)
  p = _pick(d)
  assert (p.returncode, p.stdout.strip()) == (0, "clang-19"), p.stderr
  assert "install -y -qq --no-install-recommends clang-19" in (d / "apt-get.log").read_text()
  assert p.stderr.splitlines()[-1] == "tinygrad's CPU backend compiles with clang-19 (installed: clang does not compile __bf16)"


@pytest.mark.parametrize("uid, env", [(1000, {}), (0, {"TINYGRAD_SUITE_NO_INSTALL": "1"})], ids=["not-root", "no-install"])
def test_without_such_a_compiler_it_says_the_bf16_tests_fail(tmp_path, uid, env):
  d = _bin(tmp_path, uid=uid, clang=REFUSES, clang_15=REFUSES, apt_get=APT_GET)
  p = _pick(d, **env)
  assert (p.returncode, p.stdout) == (1, "")
  assert not (d / "apt-get.log").exists()
  assert p.stderr.startswith("warning: no C compiler here compiles __bf16") and "host-clang-without-bf16" in p.stderr


def test_the_host_compiler_it_picks_compiles_tinygrads_bfloat16_kernels():
  """On the host's real PATH (with installing off): a compiler the probe accepts compiles the
  bfloat16 kernel tinygrad's CPU backend renders, and runs it right."""
  p = subprocess.run([BASH, str(SCRIPT)], env={**os.environ, "TINYGRAD_SUITE_NO_INSTALL": "1"}, capture_output=True, text=True, timeout=60)
  if p.returncode != 0: pytest.skip(f"no compiler on this host compiles __bf16 ({p.stderr.strip()[:200]})")
  program = ("from tinygrad import Tensor, dtypes\n"
             "x = Tensor([1.5, -2.25], dtype=dtypes.bfloat16, device='CPU')\n"
             "assert (x * x + x).float().tolist() == [3.75, 2.8125], (x * x + x).float().tolist()\n")
  env = {k: v for k, v in os.environ.items() if k not in ("EMULATED_DTYPES", "DEV")}
  r = subprocess.run([sys.executable, "-c", program], env={**env, "CC": p.stdout.strip()}, capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr[-2000:]
