package fusefs

import "github.com/hanwen/go-fuse/v2/fs"

// SetTestHookWritten runs hook after every WRITE reached the backing
// file, before the write releases its hold on the mode; nil removes it.
func SetTestHookWritten(hook func()) {
	if hook == nil {
		testHookWritten.Store(nil)
		return
	}
	testHookWritten.Store(&hook)
}

// SetTestHookReadBack runs hook before each written file is read back
// for its checksum; nil removes it.
func SetTestHookReadBack(hook func()) {
	if hook == nil {
		testHookReadBack.Store(nil)
		return
	}
	testHookReadBack.Store(&hook)
}

// MountOptions are the go-fuse options Mount uses for cfg, so that
// benchmarks can mount plain go-fuse file systems the way ckptfs is
// mounted.
func MountOptions(cfg Config) *fs.Options { return mountOptions(cfg) }
