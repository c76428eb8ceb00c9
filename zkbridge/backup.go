package zkbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// backupFormat is the version of the backup JSON.
const backupFormat = 1

// Backup is what ckptfs keeps of a retracted pointer, at
// <ckptfs>/<cluster>/pruned/<job>/<%019d>: enough to put it back exactly.
//
// The znode holds one JSON object with the fields below ("format" 1).
// Fields were only ever added, each optional, so every reader reads every
// backup: "locks_data" came after the first backups were written; a
// backup without it restores the locks child empty, as ckptfs did before
// (Flink only tests that locks exists), and a reader that predates it
// ignores it the same way.
type Backup struct {
	Format       int    `json:"format"`
	JobID        string `json:"job_id"`
	CheckpointID int64  `json:"checkpoint_id"`
	// Znode is the pointer's original path.
	Znode string `json:"znode"`
	// Data are the pointer's original bytes (base64 in JSON).
	Data []byte `json:"data"`
	// HadLocks: the pointer had a persistent locks child (1.15+); it is
	// recreated with it, or Flink treats the pointer as deleted.
	HadLocks bool `json:"had_locks"`
	// LocksData are the locks child's bytes (base64 in JSON; absent when
	// empty or in older backups): Curator's default data, the address of
	// the host whose JobManager made the pointer. The child is recreated
	// with them.
	LocksData []byte `json:"locks_data,omitempty"`
	// CounterZnode is the job's checkpoint id counter: a pointer is only
	// put back when its id is below the counter.
	CounterZnode string `json:"counter_znode"`
	// HAFile is the HA file the pointer names, for people.
	HAFile string `json:"ha_file,omitempty"`
	// Reason is why it was retracted.
	Reason RetractReason `json:"reason"`
	// Site, Epoch and RetractedAt record who retracted it and when.
	Site        string    `json:"site"`
	Epoch       int64     `json:"epoch"`
	RetractedAt time.Time `json:"retracted_at"`
	// ACL and LocksACL are the ACLs of the pointer and of its locks
	// child (absent in older backups, which are restored with Flink's
	// default ACL, open): the pointer is recreated with exactly them, so
	// that Flink, whose ACL "creator" lets only its own identity in, can
	// lock it again.
	ACL      []ACL `json:"acl,omitempty"`
	LocksACL []ACL `json:"locks_acl,omitempty"`
	// Kept: the takeover kept this pointer and backed it up anyway
	// (Reason "kept"), so that restore-pruned can bring it back if Flink
	// deletes it afterwards (a job that reaches FAILED loses all its
	// pointers). A later retraction of the same pointer turns it into a
	// backup of a retracted pointer.
	Kept bool `json:"kept,omitempty"`
}

func (b *Backup) encode() ([]byte, error) { return json.Marshal(b) }

func decodeBackup(data []byte) (*Backup, error) {
	var b Backup
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	switch {
	case b.Format != backupFormat:
		return nil, fmt.Errorf("backup: format %d, want %d", b.Format, backupFormat)
	case b.Znode == "" || checkAbsPath(b.Znode) != nil:
		return nil, fmt.Errorf("backup: bad znode %q", b.Znode)
	case len(b.Data) == 0:
		return nil, fmt.Errorf("backup: no data")
	}
	return &b, nil
}

// sameOriginal reports whether a backup holds exactly the pointer p: a
// retraction that finds it may go ahead without writing another. The
// locks child's data do not tell pointers apart (Flink never reads them,
// and an older backup lacks them), so they are not compared: the backup
// found is kept as it is.
func (b *Backup) sameOriginal(znode string, data []byte, hadLocks bool) bool {
	return b.Znode == znode && bytes.Equal(b.Data, data) && b.HadLocks == hadLocks
}
