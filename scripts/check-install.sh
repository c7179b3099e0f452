#!/usr/bin/env bash
# Prove the install: build the wheel (no build warnings), check that `tinyspec` is the only
# top-level package it installs, install it into a new venv outside the checkout, and from
# an unrelated directory that has its own `spec` and `compiler` packages run the console
# script, a conformance slice, the pytest plugin, the docs (the protocol page) and the C
# starter backend (built with cc, through the ADD cases). Run by scripts/test.sh (so by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/tinyspec-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { echo "check-install: $*"; }

# 1. the wheel, built in isolation from a copy of the tracked files (no .venv, no caches)
git ls-files -z | (mkdir -p "$work/src" && xargs -0 cp --parents -t "$work/src")
"$PY" -m venv "$work/build-env"
"$work/build-env/bin/pip" install -q -c constraints/ci.txt build 2>&1 | grep -v "^WARNING: Location" || true
# the isolated build environment takes the pinned setuptools too (PIP_CONSTRAINT)
PIP_CONSTRAINT="$REPO/constraints/ci.txt" env -u PYTHONDONTWRITEBYTECODE "$work/build-env/bin/python" -m build --wheel --outdir "$work/dist" "$work/src" > "$work/build.log" 2>&1 \
  || { cat "$work/build.log"; say "the wheel does not build"; exit 1; }
if grep -E "[A-Za-z]*Warning|warning: |absent from the .packages. configuration" "$work/build.log" >/dev/null; then
  grep -E -B2 -A6 "[A-Za-z]*Warning|warning: |absent from the .packages. configuration" "$work/build.log" | head -40
  say "the build printed warnings"; exit 1
fi
wheel=$(ls "$work"/dist/tinyspec-*.whl)
say "built $(basename "$wheel") without warnings"

# 2. exactly one top-level package
tops=$("$PY" - "$wheel" <<'PYEOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print(" ".join(sorted({n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")})))
PYEOF
)
[ "$tops" = "tinyspec" ] || { say "the wheel installs top-level names other than tinyspec: $tops"; exit 1; }
say "the wheel's only top-level package is tinyspec"

# 3. a new venv, installed from the wheel with the pinned dependencies
"$PY" -m venv "$work/venv"
"$work/venv/bin/pip" install -q -c constraints/ci.txt "$wheel[test]" 2>&1 | grep -v "^WARNING: Location" || true

# 4. from an unrelated directory holding packages named like the repository's folders
user="$work/user-project"
mkdir -p "$user/spec" "$user/compiler"
echo 'MINE = "the user spec package"' > "$user/spec/__init__.py"
echo 'MINE = "the user compiler package"' > "$user/compiler/__init__.py"
cd "$user"
export PATH="$work/venv/bin:$PATH" TINYSPEC_CACHE="$work/cache"
tinyspec --version
graph=$(python -c 'import pathlib, tinyspec.conformance as c; print(pathlib.Path(c.__file__).parent / "cases/ADD/float32/graph.json")')
tinyspec validate "$graph"
tinyspec conformance --backend c -k "ADD/*"
python -m pytest -q -p no:cacheprovider --pyargs tinyspec.conformance --tinyspec-backend=c -k "MUL or negative" 2>&1 | tail -2
python -c "import spec, compiler; assert spec.MINE and compiler.MINE; from tinyspec.refimpl import evaluate; from tinyspec.compiler import compile_graph; print('the user packages stay theirs')"
tinyspec docs --out "$work/docs" >/dev/null && ls "$work/docs" | tr '\n' ' ' && echo
grep -q '`validates`' "$work/docs/protocol.md" && grep -q "inline" "$work/docs/protocol.md" \
  || { say "tinyspec docs wrote no protocol page naming validates and the inline arrays"; exit 1; }
# the C starter, from the wheel alone: built with cc, the ADD cases passed with inline arrays
tinyspec new-backend --lang c "$work/starter" >/dev/null
( cd "$work/starter" && ${CC:-cc} -O2 -o backend backend.c -lm && ! grep -qi "npy" backend.c \
  && tinyspec conformance -k ADD 2>&1 | tail -1 | grep -E "^24 passed, 0 failed" ) \
  || { say "the C starter does not build or does not pass the ADD cases"; exit 1; }
say "the C starter builds with cc and passes the ADD cases inline"
tinyspec show "$graph" -o "$work/show.html" && grep -q "tinyspec-view" "$work/show.html" && grep -q "function setUp" "$work/show.html" \
  || { say "tinyspec show does not write its page (page.js/page.css missing from the wheel?)"; exit 1; }
echo "tinyspec show wrote a page with its script"
say "ok"
