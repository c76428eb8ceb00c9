#!/usr/bin/env bash
# A replica that holds checkpoint 1 of a real Flink job completely and
# checkpoint 2 only partly: what ckptfs verify decides, and why.
set -euo pipefail
ckptfs=$(realpath "$1")
data=${CKPTFS_FLINK_TESTDATA:-$(dirname "$0")/../../shared/testdata/flink}
src="$data/flink-release-1.20/stateful-scala-udf-migration-itcase-flink1.19-rocksdb-checkpoint"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

job="$work/checkpoints/$(printf '%032x' 42)"
mkdir -p "$job"
id=$("$ckptfs" inspect -o json "$src" | sed -n 's/.*"checkpoint_id": \([0-9]*\).*/\1/p')
cp -r "$src" "$job/chk-$id"
next=$((id + 1))
# The replica has chk-$next's _metadata but not yet all of its state files:
# the same checkpoint relabelled, with two files still missing.
cp -r "$src" "$job/chk-$next"
chmod -R u+w "$work"
python3 - "$job/chk-$next/_metadata" "$next" <<'PY' 2>/dev/null || true
import struct, sys
p, n = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[8:16] = struct.pack('>q', n)
open(p, 'wb').write(b)
PY
ls "$job/chk-$next" | grep -v _metadata | head -2 | while read -r f; do rm "$job/chk-$next/$f"; done

echo "== a replica holding chk-$id completely and chk-$next partly"
echo "\$ ckptfs verify $job"
set +e
"$ckptfs" verify "$job"
code=$?
set -e
echo
echo "exit status $code: the newest checkpoint is incomplete, an older one is complete."
echo "ZooKeeper would point at chk-$next; ckptfs says restore chk-$id."
