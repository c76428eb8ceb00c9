#!/usr/bin/env bash
# Builds the ckptfs sequence job against one Flink distribution.
#
#   build.sh LIBDIR OUTJAR [CONNECTORS]
#
# LIBDIR is a Flink lib directory (it holds flink-dist-X.Y.Z.jar or
# flink-dist_2.1x-X.Y.Z.jar); the sources are compiled against LIBDIR/*.jar.
# CONNECTORS, a directory of the Kafka connector's jars (flink/jars.tsv's
# connectors-X.Y.Z), adds the exactly-once sinks (src-eo) and puts those
# jars' classes in OUTJAR, as a user's job jar shades its connector.
# The bytecode level follows the Flink major version: --release 8 for 1.x
# (Flink 1.x runs on Java 8/11/17), --release 11 for 2.x (Flink 2.x classes are
# Java 11 bytecode). Override with SEQJOB_JAVA_RELEASE=N. javac/jar come from
# $JAVA_HOME/bin if JAVA_HOME is set, else from PATH. No network is used.
set -euo pipefail

if [[ $# -ne 2 && $# -ne 3 ]]; then
  echo "usage: $0 LIBDIR OUTJAR [CONNECTORS]" >&2
  exit 2
fi
libdir=$1
outjar=$2
connectors=${3:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/src

if [[ ! -d $libdir ]]; then
  echo "build.sh: $libdir is not a directory" >&2
  exit 1
fi

shopt -s nullglob
dists=("$libdir"/flink-dist-*.jar "$libdir"/flink-dist_*.jar)
# A lib/ assembled from Maven Central's modules (flink/fetch.sh) has no
# flink-dist jar: its flink-streaming-java jar names the version.
[[ ${#dists[@]} -eq 0 ]] && dists=("$libdir"/flink-streaming-java_*.jar)
shopt -u nullglob
if [[ ${#dists[@]} -ne 1 ]]; then
  echo "build.sh: want exactly one flink-dist (or flink-streaming-java) jar in $libdir, found ${#dists[@]}" >&2
  exit 1
fi
dist=$(basename "${dists[0]}")
# flink-dist-1.20.5.jar -> 1.20.5 ; flink-dist_2.12-1.15.4.jar -> 1.15.4 ;
# flink-streaming-java_2.11-1.4.2.jar -> 1.4.2
version=${dist%.jar}
version=${version#flink-dist_*-}
version=${version#flink-dist-}
version=${version#flink-streaming-java_*-}
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
# Before 1.14 Flink does not tell a function which checkpoint it
# restored (getRestoredCheckpointId), before 1.12 there is no
# NumberSequenceSource: src-1.4 holds the job for the older API.
if [[ $major == 1 && $minor -lt 14 ]]; then
  src=$here/src-1.4
fi
case $major in
  1) release=8 ;;
  2) release=11 ;;
  *) echo "build.sh: cannot tell the Flink version from $dist" >&2; exit 1 ;;
esac
release=${SEQJOB_JAVA_RELEASE:-$release}

if [[ -n ${JAVA_HOME:-} ]]; then
  javac=$JAVA_HOME/bin/javac
  jar=$JAVA_HOME/bin/jar
else
  javac=javac
  jar=jar
fi

outdir=$(dirname "$outjar")
mkdir -p "$outdir"
tmp=$(mktemp -d "$outdir/.seqjob-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cp="$libdir/*"
srcs=("$src")
if [[ -n $connectors ]]; then
  if [[ $src == "$here/src-1.4" ]]; then
    echo "build.sh: the exactly-once sinks need Flink 1.14 or later" >&2
    exit 1
  fi
  cp="$cp:$connectors/*"
  srcs+=("$here/src-eo")
fi
mapfile -t sources < <(find "${srcs[@]}" -name '*.java' | LC_ALL=C sort)
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "build.sh: no sources under $src" >&2
  exit 1
fi

mkdir "$tmp/classes"
"$javac" --release "$release" -Xlint:-options -encoding UTF-8 \
  -cp "$cp" -d "$tmp/classes" "${sources[@]}"
if [[ -n $connectors ]]; then
  for j in "$connectors"/*.jar; do
    # 11: the jar holds nothing outside META-INF (an empty placeholder).
    unzip -qo "$j" -x 'META-INF/*' -d "$tmp/classes" || [[ $? -eq 11 ]]
  done
fi
"$jar" cfe "$tmp/job.jar" ckptfs.seqjob.SeqJob -C "$tmp/classes" .
mv -f "$tmp/job.jar" "$outjar"
echo "build.sh: built $outjar (Flink $version, --release $release)" >&2
