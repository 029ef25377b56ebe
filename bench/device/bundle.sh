#!/bin/bash
# Packs what bench/wire.py needs on a bare machine with Python 3.12 and no network (the
# workplace's lent 16-core device machine) into .dev/, under the 64 MiB a call may carry (63 MB
# with the working tree on 2026-11-27):
#   Ray 2.60 without its jars, dashboard build and libraries, binaries stripped (18 MB xz);
#   the other Python wheels groupcoord and the bench import (12 MB);
#   a Java 17 runtime from jlink (19 MB xz);
#   the Kafka jars a broker and its storage tool load, repacked uncompressed so xz packs them
#   (14 MB xz).
# Then, on the device, with carry [".dev"]:
#   bash bench/device/run.sh python3 bench/wire.py ...
# (run.sh unpacks all of it once per machine and sets the paths). Needs `make setup`
# (build/kafka-libs) and a JDK with jlink. Takes about 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=.dev
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
rm -rf "$OUT" && mkdir -p "$OUT/whl"
pins() { .venv/bin/pip show "$1" | awk '/^Version/{print $2}'; }
py312=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
       --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64)
python3 -m pip download -q "${py312[@]}" -d "$WORK/ray" "ray==$(pins ray)"
python3 -m pip download -q "${py312[@]}" -d "$OUT/whl" \
  "confluent-kafka==$(pins confluent-kafka)" "kio==$(pins kio)" "crc32c==$(pins crc32c)" \
  "msgspec==$(pins msgspec)" "google-re2==$(pins google-re2)" "uvloop==$(pins uvloop)" \
  "jsonschema==$(pins jsonschema)" jsonschema-specifications referencing rpds-py
mkdir "$WORK/site" && (cd "$WORK/site" && unzip -q "$WORK"/ray/ray-*.whl)
rm -rf "$WORK"/site/ray/{jars,dashboard/client/build,rllib,data,train,tune,serve,air,llm}
strip --strip-unneeded "$WORK/site/ray/_raylet.so" "$WORK/site/ray/core/src/ray/gcs/gcs_server" \
  "$WORK/site/ray/core/src/ray/raylet/raylet"
tar cf - -C "$WORK/site" . | xz -T0 -9 > "$OUT/ray.tar.xz"
"${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}/bin/jlink" --strip-debug --no-man-pages \
  --no-header-files --output "$WORK/jre17" --add-modules java.base,java.compiler,java.datatransfer,\
java.desktop,java.instrument,java.logging,java.management,java.management.rmi,java.naming,\
java.net.http,java.prefs,java.rmi,java.scripting,java.security.jgss,java.security.sasl,java.sql,\
java.transaction.xa,java.xml,jdk.crypto.ec,jdk.jfr,jdk.management,jdk.management.agent,\
jdk.naming.dns,jdk.net,jdk.security.auth,jdk.security.jgss,jdk.unsupported,jdk.zipfs,jdk.jcmd,jdk.attach
tar cf - -C "$WORK" jre17 | xz -T0 -9 > "$OUT/jre.tar.xz"
# Kafka Connect, the REST layers and the tools' own jars are not loaded by a broker.
mkdir "$WORK/jars" "$WORK/x"
for jar in build/kafka-libs/*.jar; do
  name=$(basename "$jar")
  if [[ $name =~ ^(connect-|jersey-|jetty-|hk2-|jakarta\.|javassist|jaxb-api|javax\.activation|activation-|aopalliance|classgraph|jackson-jakarta|jackson-module-jakarta|kafka-tools-4|maven-artifact|plexus|swagger|osgi|jackson-dataformat-yaml|snakeyaml) ]]; then
    continue
  fi
  rm -rf "$WORK/x" && mkdir "$WORK/x" && (cd "$WORK/x" && unzip -q "$OLDPWD/$jar")
  # zstd-jni and snappy-java carry native libraries for every platform: keep Linux x86-64's.
  find "$WORK/x" \( -name '*.so' -o -name '*.dll' -o -name '*.dylib' -o -name '*.jnilib' \) \
    ! -path '*linux/amd64*' ! -path '*Linux/x86_64*' -delete
  (cd "$WORK/x" && zip -q -0 -r -X "$WORK/jars/$name" .)
done
tar cf - -C "$WORK" jars | xz -T0 -9 > "$OUT/kafka.tar.xz"
du -sh "$OUT"/*
