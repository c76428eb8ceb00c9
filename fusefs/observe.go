package fusefs

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// What a mount measures for the operator, kept as plain counters that a
// metrics exporter reads when it is scraped: request latency by
// operation, and Flink's attempts to reach checkpoints that are not
// complete here, by job directory.
//
// Cost on the request path: one time.Now pair and two atomic adds (the
// bucket and the sum, on the same cache line), no lock, no allocation.

// latencyBounds are the upper bounds of the request latency histogram.
// FUSE requests take from about 10µs (a cached lookup) to seconds (a
// fsync on a slow NAS).
var latencyBounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// LatencyBuckets returns the upper bounds of the buckets of Latencies.
func LatencyBuckets() []time.Duration { return slices.Clone(latencyBounds[:]) }

// op indexes the timed FUSE operations.
type op int

const (
	opLookup op = iota
	opGetattr
	opSetattr
	opStatx
	opAccess
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opCreate
	opOpen
	opRead
	opWrite
	opFlush
	opFsync
	opRelease
	opFallocate
	opLseek
	opCopyFileRange
	opOpendir
	opReaddir
	opReaddirplus
	opReleasedir
	opFsyncdir
	opStatfs
	numOps
)

// opNames are the operation labels, named like the FUSE opcodes.
var opNames = [numOps]string{
	opLookup: "lookup", opGetattr: "getattr", opSetattr: "setattr", opStatx: "statx",
	opAccess: "access", opMknod: "mknod", opMkdir: "mkdir", opUnlink: "unlink",
	opRmdir: "rmdir", opRename: "rename", opLink: "link", opSymlink: "symlink",
	opReadlink: "readlink", opGetxattr: "getxattr", opListxattr: "listxattr",
	opSetxattr: "setxattr", opRemovexattr: "removexattr", opCreate: "create",
	opOpen: "open", opRead: "read", opWrite: "write", opFlush: "flush",
	opFsync: "fsync", opRelease: "release", opFallocate: "fallocate", opLseek: "lseek",
	opCopyFileRange: "copy_file_range", opOpendir: "opendir", opReaddir: "readdir",
	opReaddirplus: "readdirplus", opReleasedir: "releasedir", opFsyncdir: "fsyncdir",
	opStatfs: "statfs",
}

// opHistogram counts one operation's requests by latency bucket.
type opHistogram struct {
	// buckets[i] counts requests that took at most latencyBounds[i]
	// (and more than the bound before); the last one counts the rest.
	buckets  [len(latencyBounds) + 1]atomic.Uint64
	sumNanos atomic.Uint64
}

// latencies is one mount's request latency histogram by operation.
type latencies [numOps]opHistogram

// observe records one request of o that started at start.
func (l *latencies) observe(o op, start time.Time) { l.record(o, time.Since(start)) }

// record records one request of o that took d.
func (l *latencies) record(o op, d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h := &l[o]
	h.buckets[i].Add(1)
	h.sumNanos.Add(uint64(max(d, 0)))
}

// OpLatency is a snapshot of one operation's latency histogram.
type OpLatency struct {
	// Op is the operation, named like its FUSE opcode ("lookup", "read").
	Op string
	// Count is the number of requests; Sum their total duration.
	Count uint64
	Sum   time.Duration
	// Cumulative[i] counts requests that took at most LatencyBuckets()[i].
	Cumulative []uint64
}

// Latencies returns the request latency histogram of every operation
// the mount has served at least once, ordered by operation name. It
// measures the time from go-fuse handing a request to ckptfs until
// ckptfs returns its answer: the daemon's share, without the kernel's
// queueing. Reads served by FUSE passthrough never reach the daemon.
func (s *Server) Latencies() []OpLatency {
	var out []OpLatency
	for o := range numOps {
		h := &s.fsys.latency[o]
		ol := OpLatency{Op: opNames[o], Cumulative: make([]uint64, len(latencyBounds))}
		// Buckets are read one by one while requests go on: each value is
		// a true count at some moment, and Count is their total, so the
		// histogram stays consistent (monotonic) for the scraper.
		var acc uint64
		for i := range latencyBounds {
			acc += h.buckets[i].Load()
			ol.Cumulative[i] = acc
		}
		ol.Count = acc + h.buckets[len(latencyBounds)].Load()
		ol.Sum = time.Duration(h.sumNanos.Load())
		if ol.Count > 0 {
			out = append(out, ol)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return out
}

// maxCountedDirs bounds the directories IncompleteLookups keeps apart;
// lookups in further directories are counted under OtherDirs.
const maxCountedDirs = 1024

// OtherDirs is the key under which IncompleteLookups counts the
// directories beyond the first maxCountedDirs.
const OtherDirs = "*"

// dirCounter counts events by directory.
type dirCounter struct {
	mu     sync.Mutex
	counts map[string]uint64 // GUARDED_BY(mu)
}

func (c *dirCounter) add(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[string]uint64)
	}
	if _, ok := c.counts[dir]; !ok && len(c.counts) >= maxCountedDirs {
		dir = OtherDirs
	}
	c.counts[dir]++
}

func (c *dirCounter) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// IncompleteLookups returns, by job directory (relative to the mount
// root), how many lookups of chk-N directories were refused because the
// checkpoint is not complete here: Flink asked for a checkpoint this
// site does not hold. Stats().IncompleteLookups is their total.
func (s *Server) IncompleteLookups() map[string]uint64 {
	return s.fsys.incompleteByDir.snapshot()
}

// timedFS wraps the node file system and times every request that
// answers.
type timedFS struct {
	fuse.RawFileSystem
	lat *latencies
}

func (t *timedFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	defer t.lat.observe(opLookup, time.Now())
	return t.RawFileSystem.Lookup(cancel, header, name, out)
}

func (t *timedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.lat.observe(opGetattr, time.Now())
	return t.RawFileSystem.GetAttr(cancel, in, out)
}

func (t *timedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.lat.observe(opSetattr, time.Now())
	return t.RawFileSystem.SetAttr(cancel, in, out)
}

func (t *timedFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	defer t.lat.observe(opStatx, time.Now())
	return t.RawFileSystem.Statx(cancel, in, out)
}

func (t *timedFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	defer t.lat.observe(opAccess, time.Now())
	return t.RawFileSystem.Access(cancel, in)
}

func (t *timedFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.lat.observe(opMknod, time.Now())
	return t.RawFileSystem.Mknod(cancel, in, name, out)
}

func (t *timedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.lat.observe(opMkdir, time.Now())
	return t.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (t *timedFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.lat.observe(opUnlink, time.Now())
	return t.RawFileSystem.Unlink(cancel, header, name)
}

func (t *timedFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.lat.observe(opRmdir, time.Now())
	return t.RawFileSystem.Rmdir(cancel, header, name)
}

func (t *timedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	defer t.lat.observe(opRename, time.Now())
	return t.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (t *timedFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.lat.observe(opLink, time.Now())
	return t.RawFileSystem.Link(cancel, in, name, out)
}

func (t *timedFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	defer t.lat.observe(opSymlink, time.Now())
	return t.RawFileSystem.Symlink(cancel, header, target, name, out)
}

func (t *timedFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	defer t.lat.observe(opReadlink, time.Now())
	return t.RawFileSystem.Readlink(cancel, header)
}

func (t *timedFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	defer t.lat.observe(opGetxattr, time.Now())
	return t.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (t *timedFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	defer t.lat.observe(opListxattr, time.Now())
	return t.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (t *timedFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	defer t.lat.observe(opSetxattr, time.Now())
	return t.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (t *timedFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	defer t.lat.observe(opRemovexattr, time.Now())
	return t.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (t *timedFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer t.lat.observe(opCreate, time.Now())
	return t.RawFileSystem.Create(cancel, in, name, out)
}

func (t *timedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.lat.observe(opOpen, time.Now())
	return t.RawFileSystem.Open(cancel, in, out)
}

func (t *timedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	defer t.lat.observe(opRead, time.Now())
	return t.RawFileSystem.Read(cancel, in, buf)
}

func (t *timedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer t.lat.observe(opWrite, time.Now())
	return t.RawFileSystem.Write(cancel, in, data)
}

func (t *timedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer t.lat.observe(opWrite, time.Now())
	return t.RawFileSystem.Writev(cancel, in, data)
}

func (t *timedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	defer t.lat.observe(opFlush, time.Now())
	return t.RawFileSystem.Flush(cancel, in)
}

func (t *timedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	defer t.lat.observe(opFsync, time.Now())
	return t.RawFileSystem.Fsync(cancel, in)
}

func (t *timedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	defer t.lat.observe(opRelease, time.Now())
	t.RawFileSystem.Release(cancel, in)
}

func (t *timedFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	defer t.lat.observe(opFallocate, time.Now())
	return t.RawFileSystem.Fallocate(cancel, in)
}

func (t *timedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	defer t.lat.observe(opLseek, time.Now())
	return t.RawFileSystem.Lseek(cancel, in, out)
}

func (t *timedFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	defer t.lat.observe(opCopyFileRange, time.Now())
	return t.RawFileSystem.CopyFileRange(cancel, in)
}

func (t *timedFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.lat.observe(opOpendir, time.Now())
	return t.RawFileSystem.OpenDir(cancel, in, out)
}

func (t *timedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.lat.observe(opReaddir, time.Now())
	return t.RawFileSystem.ReadDir(cancel, in, out)
}

func (t *timedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.lat.observe(opReaddirplus, time.Now())
	return t.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (t *timedFS) ReleaseDir(in *fuse.ReleaseIn) {
	defer t.lat.observe(opReleasedir, time.Now())
	t.RawFileSystem.ReleaseDir(in)
}

func (t *timedFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	defer t.lat.observe(opFsyncdir, time.Now())
	return t.RawFileSystem.FsyncDir(cancel, in)
}

func (t *timedFS) StatFs(cancel <-chan struct{}, header *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	defer t.lat.observe(opStatfs, time.Now())
	return t.RawFileSystem.StatFs(cancel, header, out)
}
