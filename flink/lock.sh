#!/usr/bin/env bash
# lock.sh NAME: resolves flink/assemble/NAME/pom.xml with Maven and
# writes flink/NAME.lock: one line per jar (a release's assembled lib/, or
# a jar set of jars.tsv), its sha256 and its path in Maven Central's
# layout (sha256sum's format). Run by hand when the pom changes; fetch.sh
# reads only the lock, and versions.tsv or jars.tsv holds the lock's own
# sha256.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
v=${1:?usage: lock.sh NAME}
pom="$here/assemble/$v/pom.xml"
[ -f "$pom" ] || { echo "lock.sh: no $pom" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mvn -q -B -f "$pom" -Dmaven.repo.local="$tmp/m2" dependency:copy-dependencies \
	-DincludeScope=runtime -Dmdep.useRepositoryLayout=true -DoutputDirectory="$tmp/lib" >&2
(cd "$tmp/lib" && find . -name '*.jar' | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum) >"$here/$v.lock"
echo "lock.sh: $(wc -l <"$here/$v.lock") jars in $here/$v.lock" >&2
