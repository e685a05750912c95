#!/usr/bin/env bash
# Install ultra_multr with ULTRA_pytorch at the pinned commit, ready for main.py, the demo and the tests.
#
#   bash example/install.sh          # torch (CPU build), ULTRA, ultra_multr with main.py's extras
#   bash example/install.sh --test   # the same with the test extras (pytest, pyarrow, submitit, ...)
#
# Where ULTRA comes from, first match wins:
#   1. $ULTRA_PYTORCH_SRC: a local checkout of ULTRA_pytorch (its files are copied);
#   2. ../shared/ULTRA_pytorch beside this repository (a read-only copy of the pinned commit);
#   3. git clone of github.com/ULTR-Community/ULTRA_pytorch at the pinned commit.
# It goes to $ULTRA_PYTORCH_DIR (default: ULTRA_pytorch/ in this repository, git-ignored) and is installed
# editable from there, so that ULTRA's main.py stays beside the `ultra` package. A copy is made afresh at
# every run; a git checkout there is reused only at the pinned commit. Nothing stale is kept silently.
set -euo pipefail
ULTRA_COMMIT=1757587f369336ac5b76c48f9805e4e921597a3b
ULTRA_GIT=https://github.com/ULTR-Community/ULTRA_pytorch
repo=$(cd "$(dirname "$0")/.." && pwd)
extras=ultra
case "${1:-}" in
  "") ;;
  --test) extras=test ;;
  *) echo "usage: bash example/install.sh [--test]" >&2; exit 2 ;;
esac
dest=${ULTRA_PYTORCH_DIR:-$repo/ULTRA_pytorch}
src=${ULTRA_PYTORCH_SRC:-}
if [ -z "$src" ] && [ -d "$repo/../shared/ULTRA_pytorch" ]; then
  src=$repo/../shared/ULTRA_pytorch
fi

# torch first, pinned: a plain `torch` requirement with no torch installed would download a CUDA build.
pip install torch==2.13.0
python -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 64)' 2>/dev/null \
  || pip install "setuptools>=64"

if [ -n "$src" ]; then
  [ -f "$src/main.py" ] && [ -d "$src/ultra" ] \
    || { echo "install.sh: $src is not a ULTRA_pytorch checkout (no main.py or ultra/)" >&2; exit 1; }
  src=$(cd "$src" && pwd)
  if [ "$src" != "$(cd "$dest" 2>/dev/null && pwd)" ]; then
    echo "install.sh: copying ULTRA_pytorch from $src to $dest"
    tmp=$(mktemp -d "$(dirname "$dest")/.ultra-copy.XXXXXX")
    cp -R "$src/." "$tmp/"
    chmod -R u+w "$tmp"
    rm -rf "$tmp"/*.egg-info "$tmp/build"
    rm -rf "$dest"
    mv "$tmp" "$dest"
  fi
elif [ -d "$dest/.git" ] && [ "$(git -C "$dest" rev-parse HEAD 2>/dev/null)" = "$ULTRA_COMMIT" ]; then
  echo "install.sh: reusing $dest at $ULTRA_COMMIT"
else
  echo "install.sh: cloning $ULTRA_GIT at $ULTRA_COMMIT into $dest"
  rm -rf "$dest"
  git clone -q "$ULTRA_GIT" "$dest"
  git -C "$dest" checkout -q "$ULTRA_COMMIT"
fi

# ULTRA has no pyproject.toml: --use-pep517 keeps pip off the legacy `setup.py develop` path (it needs network).
pip install --no-deps --no-build-isolation --use-pep517 -e "$dest"
pip install --no-build-isolation -e "$repo[$extras]"
python - "$dest" <<'EOF'
import os, sys
import ultra, ultra_multr
main_py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ultra.__file__))), "main.py")
if not os.path.isfile(main_py):
    sys.exit("install.sh: ULTRA's main.py is not beside the installed ultra package (%s)" % main_py)
print("install.sh: ULTRA from %s, main.py at %s; ultra_multr from %s" % (sys.argv[1], main_py, ultra_multr.__file__))
EOF
