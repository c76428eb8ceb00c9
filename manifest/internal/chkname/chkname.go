// Package chkname holds the rule for Flink's checkpoint directory names,
// chk-N, so that package manifest and its subpackage metadata (which
// manifest imports, so it cannot import manifest) apply the same one.
// Every other package uses manifest.CheckpointIDFromDirName.
package chkname

import (
	"strconv"
	"strings"
)

// ID returns N for a name chk-N, as Flink names checkpoint directories:
// N in decimal, from 0 to the largest int64, without sign or leading
// zero.
func ID(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "chk-")
	if !ok || rest == "" || rest[0] == '+' || rest[0] == '-' || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
