#!/usr/bin/env bash
# What an operator installs, laid out once:
#
#   build.sh stage ROOT BINARY     the installed tree under ROOT (make install)
#   build.sh deb OUTDIR BINARY     a Debian package of it (make deb)
#   build.sh version               the version both carry, from git
#
# The tree: the binary in /usr/bin, the mount helper mount(8) runs, the
# units in systemd's package directory, the drop-ins for Flink's units,
# the alert rules and the dashboard under /usr/share/ckptfs, the example
# configuration in /etc/ckptfs (kept when one exists: a conffile of the
# package), the documentation under /usr/share/doc/ckptfs.
set -euo pipefail
cd "$(dirname "$0")/../.."

# version: v1.2.3 from a tag, 1.2.3+5.gabc1234 five commits after it,
# 0.0.0+572.gabc1234 with no tag (the count keeps upgrades in order),
# .dirty appended for uncommitted changes. dpkg orders them as git does.
# CKPTFS_PACKAGE_VERSION overrides it (the tests' upgrades).
version() {
	local d
	if [ -n "${CKPTFS_PACKAGE_VERSION:-}" ]; then
		echo "$CKPTFS_PACKAGE_VERSION"
		return
	fi
	if d=$(git describe --tags --match 'v[0-9]*' --dirty=.dirty 2>/dev/null); then
		d=${d#v}
		# 1.2.3-5-gabc1234 -> 1.2.3+5.gabc1234
		echo "$d" | sed -E 's/-([0-9]+)-(g[0-9a-f]+)/+\1.\2/'
	else
		echo "0.0.0+$(git rev-list --count HEAD).g$(git rev-parse --short=7 HEAD)$(git diff --quiet HEAD 2>/dev/null || echo .dirty)"
	fi
}

# The time of the last commit: every file of the package gets it, so the
# same commit gives the same bytes.
epoch() { git log -1 --format=%ct; }

stage() {
	local root=$1 bin=$2
	install -D -m 0755 "$bin" "$root/usr/bin/ckptfs"
	install -d "$root/usr/sbin"
	ln -sfn ../bin/ckptfs "$root/usr/sbin/mount.fuse.ckptfs"
	install -d "$root/usr/lib/systemd/system"
	install -m 0644 deploy/systemd/ckptfs.service deploy/systemd/ckptfs-takeover.service "$root/usr/lib/systemd/system/"
	for d in flink-jobmanager.service.d flink-taskmanager.service.d; do
		install -D -m 0644 "deploy/systemd/$d/ckptfs.conf" "$root/usr/share/ckptfs/systemd/$d/ckptfs.conf"
	done
	install -D -m 0644 deploy/prometheus/ckptfs-alerts.yml "$root/usr/share/ckptfs/prometheus/ckptfs-alerts.yml"
	install -D -m 0644 deploy/grafana/ckptfs-dashboard.json "$root/usr/share/ckptfs/grafana/ckptfs-dashboard.json"
	if [ -e "$root/etc/ckptfs/ckptfs.yaml" ]; then
		echo "kept $root/etc/ckptfs/ckptfs.yaml"
	else
		install -D -m 0644 deploy/ckptfs.yaml "$root/etc/ckptfs/ckptfs.yaml"
	fi
	install -d "$root/usr/share/doc/ckptfs"
	install -m 0644 README.md docs/*.md "$root/usr/share/doc/ckptfs/"
}

# changelog: the Debian changelog of this version, the subjects of the
# commits since the last tag (at most 200), dated by the last commit.
changelog() {
	local v=$1 range=HEAD tag
	if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
		range="$tag..HEAD"
	fi
	echo "ckptfs ($v) unstable; urgency=medium"
	echo
	git log --no-merges --format='  * %s' -n 200 "$range" | fold -s -w 78 | sed -E 's/^([^ ])/    \1/'
	echo
	echo " -- ckptfs developers <ckptfs@users.noreply.github.com>  $(date -u -R -d "@$(epoch)")"
}

# copyright: the package's copyright file, with the license of every Go
# module the binary carries, read from the module cache it was built from.
copyright() {
	local bin=$1 cache
	cache=$(go env GOMODCACHE)
	cat <<'HEAD'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: ckptfs
Source: https://github.com/ckptfs/ckptfs

Files: *
Copyright: the ckptfs developers
License: unspecified
 The repository names no license yet.
HEAD
	go version -m "$bin" | awk '$1 == "dep" || $1 == "=>" { print $2, $3 }' | while read -r mod ver; do
		# The module cache writes an upper-case letter as ! and its lower case.
		local dir lic
		dir="$cache/$(echo "$mod" | sed -E 's/([A-Z])/!\L\1/g')@$ver"
		lic=$(ls "$dir"/LICENSE* "$dir"/COPYING* 2>/dev/null | head -1 || true)
		echo
		echo "Files: vendored Go module $mod $ver"
		if [ -n "$lic" ]; then
			echo "License: see below"
			sed -e 's/^$/./' -e 's/^/ /' "$lic"
		else
			echo "License: not found in the module cache"
		fi
	done
}

deb() {
	local out=$1 bin=$2 v arch work
	v=$(version)
	arch=$(dpkg --print-architecture)
	work=$(mktemp -d)
	trap 'rm -rf "$work"' RETURN
	stage "$work/root" "$bin" >/dev/null
	changelog "$v" | gzip -9n >"$work/root/usr/share/doc/ckptfs/changelog.Debian.gz"
	copyright "$bin" >"$work/root/usr/share/doc/ckptfs/copyright"
	install -d "$work/root/DEBIAN"
	sed -e "s/@VERSION@/$v/" -e "s/@ARCH@/$arch/" \
		-e "s/@SIZE@/$(du -sk --exclude=DEBIAN "$work/root" | cut -f1)/" \
		deploy/package/control >"$work/root/DEBIAN/control"
	echo /etc/ckptfs/ckptfs.yaml >"$work/root/DEBIAN/conffiles"
	install -m 0755 deploy/package/postinst deploy/package/prerm deploy/package/postrm "$work/root/DEBIAN/"
	(cd "$work/root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$work/root/DEBIAN/md5sums"
	find "$work/root" -exec touch -h -d "@$(epoch)" {} +
	mkdir -p "$out"
	local deb="$out/ckptfs_${v}_${arch}.deb"
	SOURCE_DATE_EPOCH=$(epoch) dpkg-deb --root-owner-group -Zxz --build "$work/root" "$deb" >/dev/null
	echo "$deb"
}

case "${1:-}" in
stage) stage "$2" "$3" ;;
deb) deb "$2" "$3" ;;
version) version ;;
*) echo "usage: $0 stage ROOT BINARY | deb OUTDIR BINARY | version" >&2; exit 2 ;;
esac
