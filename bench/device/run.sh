#!/bin/bash
# On a bare machine with Python 3.12 and no network: unpacks what bench/device/bundle.sh packed
# into .dev/ (once per machine), puts it on the paths, and runs its arguments, e.g.
#   bash bench/device/run.sh python3 bench/wire.py
# Python comes from $PY (default python3), the unpacked packages go to $SITE (/tmp/site).
set -e
PY=${PY:-python3}
D=$PWD/.dev
S=${SITE:-/tmp/site}
t0=$(date +%s)
if [ ! -e "$S/ray/_raylet.so" ]; then
  mkdir -p "$S"
  tar xJf "$D/ray.tar.xz" -C "$S"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S" "$D"/whl/*.whl
fi
[ -x /tmp/jre17/bin/java ] || tar xJf "$D/jre.tar.xz" -C /tmp
if ! ls build/kafka-libs/kafka-clients-*.jar >/dev/null 2>&1; then
  mkdir -p build/kafka-libs
  tar xJf "$D/kafka.tar.xz" -C build/kafka-libs --strip-components=1
fi
# groupcoord's packages as pyproject.toml maps them to folders, without installing it.
$PY - <<'EOF'
import os, tomllib
with open("pyproject.toml", "rb") as f:
    folders = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
for package, folder in folders.items():
    link = os.path.join("/tmp/gc", *package.split("."))
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.islink(link):
        os.remove(link)
    os.symlink(os.path.abspath(folder), link)
EOF
mkdir -p /tmp/gcbin
if ! command -v setpriv >/dev/null; then
  printf '#!/bin/sh\nshift 3\nexec "$@"\n' > /tmp/gcbin/setpriv; chmod +x /tmp/gcbin/setpriv
fi
export PYTHONPATH=/tmp/gc:$S:$PWD
export PATH=/tmp/jre17/bin:/tmp/gcbin:$PATH
export PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
echo "setup $(( $(date +%s) - t0 )) s; $(nproc) cpus; $($PY --version); $(java -version 2>&1 | head -1)"
"$@"
