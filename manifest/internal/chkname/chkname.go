// Package chkname holds the rule for Flink's checkpoint directory names,
// chk-N, so that package manifest and its subpackage metadata (which
// manifest imports, so it cannot import manifest) apply the same one.
// Every other package uses manifest.CheckpointIDFromDirName.
package chkname

import (
	"strconv"
	"strings"
)

// IsSavepoint reports whether name is a savepoint directory's, as Flink
// names them: "savepoint-", the first 6 hex digits of the job id, "-", 12
// random hex digits (AbstractFsCheckpointStorageAccess
// .initializeLocationForSavepoint, FileUtils.getRandomFilename).
func IsSavepoint(name string) bool {
	rest, ok := strings.CutPrefix(name, "savepoint-")
	if !ok || len(rest) != 6+1+12 || rest[6] != '-' {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if i != 6 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

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
