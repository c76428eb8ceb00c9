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

// exists and absent answer a lookup on the backing file system.
func exists() error { return nil }
func absent() error { return syscall.ENOENT }

// TestCheckpointNamesAsManifest: a refused lookup is counted and logged
// as "Flink asked for incomplete chk-N" exactly for the names manifest
// takes for checkpoint directories, with manifest's N; any other refused
// name is counted as hidden.
func TestCheckpointNamesAsManifest(t *testing.T) {
	for _, name := range checkpointDirNames {
		var logs bytes.Buffer
		fsys := &fileSystem{vis: incompleteEverywhere{}, log: slog.New(slog.NewJSONHandler(&logs, nil)), now: time.Now}
		fsys.setMode(ModeReplica)
		if errno := fsys.visible("job", name, exists); errno != syscall.ENOENT {
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

// TestAbsentCheckpointNotHidden: a chk-N with nothing by that name on
// the backing file system (stat chk-999 in a loop) is plain ENOENT,
// neither counted nor logged: the mount hid nothing.
func TestAbsentCheckpointNotHidden(t *testing.T) {
	var logs bytes.Buffer
	fsys := &fileSystem{vis: incompleteEverywhere{}, log: slog.New(slog.NewJSONHandler(&logs, nil)), now: time.Now}
	fsys.setMode(ModeReplica)
	for range 2000 {
		if errno := fsys.visible("job", "chk-999", absent); errno != syscall.ENOENT {
			t.Fatalf("lookup of chk-999: %v, want ENOENT", errno)
		}
	}
	if st := fsys.stats.snapshot(); st.IncompleteLookups != 0 || st.HiddenLookups != 0 {
		t.Errorf("counted %d incomplete, %d hidden lookups, want none", st.IncompleteLookups, st.HiddenLookups)
	}
	if by := fsys.incompleteByDir.snapshot(); len(by) != 0 {
		t.Errorf("counted by job directory: %v", by)
	}
	if logs.Len() != 0 {
		t.Errorf("logged %s", logs.String())
	}
}

// TestHiddenCheckpointLogBounded: 2,000 lookups of a checkpoint that
// exists but is not complete are all counted, and logged in a bounded
// number of lines whose counts of held-back lines add up to every
// lookup.
func TestHiddenCheckpointLogBounded(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(1000, 0)
	fsys := &fileSystem{vis: incompleteEverywhere{}, log: slog.New(slog.NewJSONHandler(&logs, nil)), now: func() time.Time { return now }}
	fsys.setMode(ModeReplica)
	const lookups = 2000
	step := 10 * time.Millisecond // 20 s in all
	for range lookups {
		now = now.Add(step)
		if errno := fsys.visible("job", "chk-7", exists); errno != syscall.ENOENT {
			t.Fatalf("lookup of chk-7: %v, want ENOENT", errno)
		}
	}
	if st := fsys.stats.snapshot(); st.IncompleteLookups != lookups {
		t.Errorf("counted %d lookups, want %d", st.IncompleteLookups, lookups)
	}
	if by := fsys.incompleteByDir.snapshot(); by["job"] != lookups {
		t.Errorf("counted by job directory: %v, want job %d", by, lookups)
	}
	// One more after a quiet interval reports the lines held back last.
	now = now.Add(logInterval)
	fsys.visible("job", "chk-7", exists)

	dec := json.NewDecoder(&logs)
	lines, reported := 0, uint64(0)
	for dec.More() {
		var line struct {
			Msg        string
			Checkpoint int64
			Suppressed uint64
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		if line.Msg != "Flink asked for incomplete chk-N" || line.Checkpoint != 7 {
			t.Errorf("logged %+v", line)
		}
		if lines == 0 && line.Suppressed != 0 {
			t.Errorf("the first line says %d were held back", line.Suppressed)
		}
		lines++
		reported += 1 + line.Suppressed
	}
	if most := 2 + int(lookups*step/logInterval); lines < 2 || lines > most {
		t.Errorf("%d log lines for %d lookups in %v, want 2 to %d", lines, lookups, lookups*step, most)
	}
	if reported != lookups+1 {
		t.Errorf("the lines account for %d lookups, want %d", reported, lookups+1)
	}
}
