package fusefs

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// checkpointDirNames are names around the chk-N rule: some Flink writes,
// some it never writes but a regular expression like chk-[0-9]+ takes.
var checkpointDirNames = []string{
	"chk-0", "chk-7", "chk-42", "chk-9223372036854775807",
	"chk-007", "chk-00", "chk-", "chk-9223372036854775808", "chk-+1", "chk--1",
	"chk-1a", "chk-0x1", "chk-1 ", "chk-\u0663", "CHK-1", "xchk-1", "shared",
}

// incompleteEverywhere answers as a catalog does for a checkpoint
// directory that is not complete, whatever the name.
type incompleteEverywhere struct{}

func (incompleteEverywhere) Visible(string, string) error { return manifest.ErrIncomplete }

// TestCheckpointNamesAsManifest: a refused lookup is counted and logged
// as "Flink asked for incomplete chk-N" exactly for the names manifest
// takes for checkpoint directories, with manifest's N; any other refused
// name is counted as hidden.
func TestCheckpointNamesAsManifest(t *testing.T) {
	for _, name := range checkpointDirNames {
		var logs bytes.Buffer
		fsys := &fileSystem{vis: incompleteEverywhere{}, log: slog.New(slog.NewJSONHandler(&logs, nil)), now: time.Now}
		fsys.setMode(ModeReplica)
		if errno := fsys.visible("job", name); errno != syscall.ENOENT {
			t.Errorf("%q: %v, want ENOENT", name, errno)
		}
		id, isChk := manifest.CheckpointIDFromDirName(name)
		st := fsys.stats.snapshot()
		if counted := st.IncompleteLookups == 1; counted != isChk {
			t.Errorf("%q: counted as an incomplete checkpoint: %v; manifest takes it for chk-N: %v", name, counted, isChk)
		}
		if hidden := st.HiddenLookups == 1; hidden == isChk {
			t.Errorf("%q: counted as hidden: %v; manifest takes it for chk-N: %v", name, hidden, isChk)
		}
		if !isChk {
			if logs.Len() != 0 {
				t.Errorf("%q: logged %s", name, logs.String())
			}
			continue
		}
		var line struct {
			Msg        string
			Checkpoint int64
		}
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Msg != "Flink asked for incomplete chk-N" || line.Checkpoint != id {
			t.Errorf("%q: logged %s (%v), want checkpoint %d", name, logs.String(), err, id)
		}
	}
}
