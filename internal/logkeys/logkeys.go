package logkeys

// The stable keys of the concepts every part of ckptfs logs.
const (
	Site       = "site"       // the site name (dc1, dc2)
	Job        = "job"        // Flink's job id (32 hex digits)
	Checkpoint = "checkpoint" // a checkpoint id (a number)
	Znode      = "znode"      // a ZooKeeper path
	Version    = "version"    // a znode's data version
)

// Reserved are the keys slog writes itself; an attribute with one of
// them would make a JSON line carry the key twice.
var Reserved = []string{"time", "level", "msg", "source"}

// Keys are every key a log attribute may have, with its meaning.
var Keys = map[string]string{
	Site:       "the site name",
	Job:        "Flink's job id",
	Checkpoint: "a checkpoint id",
	Znode:      "a ZooKeeper path",
	Version:    "a znode's data version",

	"err":          "the error",
	"component":    "the part of ckptfs that logs (mount, fusefs, go-fuse, zkbridge, zk-client, publisher)",
	"mountpoint":   "where the mount is",
	"backing":      "the directory the mount serves",
	"dir":          "a directory relative to the mount's backing directory (a job or checkpoint directory)",
	"mode":         "a mount mode (replica, primary, fenced)",
	"from":         "the mode before a change",
	"to":           "the mode after a change",
	"passthrough":  "whether FUSE passthrough is in use",
	"manifest":     "a sealed manifest file",
	"name":         "a name in a directory",
	"reason":       "why something was done or refused",
	"epoch":        "the takeover epoch",
	"completeness": "a completeness level (L1, L2, L3); not level, which is the log level",
	"session":      "a ZooKeeper session id",
	"server":       "a ZooKeeper server address",
	"identity":     "ckptfs's ZooKeeper identity (scheme:user, never a password nor a digest's hash; empty when anonymous)",
	"outage":       "how long ckptfs had no ZooKeeper session",
	"sessions":     "ZooKeeper session ids (of Flink's JobManagers)",
	"addresses":    "addresses (of Flink's JobManagers)",
	"namespace":    "Flink's ZooKeeper namespace",
	"holder":       "the holder of the takeover lock",
	"remaining":    "time left of a wait",
	"changes":      "how many changes to the backing file system are in flight",
	"detail":       "what a reason means in this case",
	"retry":        "time until a retry",
	"suppressed":   "lines of the same kind a rate limit held back since the one before",
	"backup":       "the znode of a pointer's backup",
	"restored":     "the znode of a restored pointer",
	"locks":        "whether a pointer had a locks child",
	"pointers":     "checkpoint ids of pointers",
	"configured":   "a configured value",
	"detected":     "a detected value",
	"addr":         "a listening address",
	"file":         "a file relative to the mount's backing directory",
	"files":        "files relative to the mount's backing directory",
	"size":         "a file size in bytes",
	"pid":          "a process id",
	"late":         "how long past a deadline (the daemon's write deadline, its watchdog's)",
	"waited":       "how long something was waited for",
	"timeout":      "a time limit",
	"connection":   "a FUSE connection (its number under /sys/fs/fuse/connections)",
	"op":           "a FUSE operation",
	"log":          "where the daemon's log goes (a file, the journal, syslog)",
	"staging":      "the staging directory of a DR rehearsal (make dr-rehearsal)",
	"missing":      "a file a DR rehearsal leaves out of the replica",
	"entries":      "how many entries a directory holds",
	"names":        "the first names of a directory's entries",
	"jobs":         "how many job directories",
	"checkpoints":  "how many checkpoint directories",
	"complete":     "how many of them are complete",
}
