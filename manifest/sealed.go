package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// castagnoli is the CRC-32C table; the standard library uses the CPU's
// CRC32 instruction for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewChecksum returns the hash of the checksums ckptfs records of
// files: CRC-32C, in sealed manifests (the Sealer's read back) and in
// synchronous requests of HA files (design §4.8). Every site computes it
// with this one.
func NewChecksum() hash.Hash32 { return crc32.New(castagnoli) }

// Checksum is NewChecksum's sum of data.
func Checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// FormatChecksum writes a CRC-32C as a manifest stores it.
func FormatChecksum(crc uint32) string { return fmt.Sprintf("crc32c:%08x", crc) }

// SealedPath is where the sealed manifest of the checkpoint directory
// chkRel (relative to the backing root, e.g. "checkpoints/<job>/chk-7")
// lives: under .ckptfs, never inside Flink's directories, whose
// non-recursive deletes extra files would block.
func SealedPath(backing, chkRel string) string {
	return filepath.Join(backing, StateDir, "manifests", chkRel+".json")
}

// sealedManifest is the file format of a sealed manifest.
type sealedManifest struct {
	Manifest
	// Files are the manifest's files with their checksums (it shadows
	// Manifest.Files in the JSON).
	Files []sealedFile `json:"files"`
	// Dir is the checkpoint directory relative to the backing root.
	Dir      string    `json:"dir"`
	SealedAt time.Time `json:"sealed_at"`
}

// sealedFile is a file of a sealed manifest. Only a sealed manifest has
// checksums: File leaves them out, since the catalog keeps millions.
type sealedFile struct {
	File
	// Checksum is "crc32c:<8 hex digits>"; empty for a directory or a
	// segment of a file shared by many checkpoints.
	Checksum string `json:"checksum,omitempty"`
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Backing is the primary's backing directory.
	Backing string
	// Resolver resolves the checkpoint's absolute references.
	Resolver *Resolver
	// ReadUnwritten makes sealing read and hash files that this mount did
	// not see written (for example, written through another machine's
	// mount). Without it such files are sealed with their size only.
	ReadUnwritten bool
	// OnSealed, when set, is called after each attempt with the sealed
	// manifest's path or the error.
	OnSealed func(chkRel, sealedPath string, err error)
	// Verifier, when set, learns the checksum of every file read back
	// (FileWritten), so that verifying a checkpoint this mount sealed
	// does not read its files a second time.
	Verifier *Verifier
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Recorder implements Sealer for a primary mount: it remembers the
// checksums of files written through the mount and seals a manifest in
// the background when a checkpoint's _metadata is committed.
type Recorder struct {
	cfg RecorderConfig

	mu sync.Mutex
	// written: GUARDED_BY(mu). Path relative to Backing -> what was seen.
	written map[string]writtenFile
	// queue: GUARDED_BY(mu). _metadata paths waiting to be sealed.
	queue []string
	wake  chan struct{}
	// attempts counts the seals Run has tried (Attempts).
	attempts atomic.Uint64
}

// Attempts is how many seals Run has tried so far: a caller waiting for
// Run to finish sees whether it makes progress.
func (r *Recorder) Attempts() uint64 { return r.attempts.Load() }

// writtenFile is what the mount reported for one file. INVARIANT:
// without hasChecksum, size and crc are zero.
type writtenFile struct {
	size        int64
	crc         uint32
	hasChecksum bool
}

var _ Sealer = (*Recorder)(nil)

// NewRecorder returns a Recorder; Run seals what is committed.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if !filepath.IsAbs(cfg.Backing) {
		return nil, fmt.Errorf("sealer: Backing %q must be absolute", cfg.Backing)
	}
	if cfg.Resolver == nil {
		return nil, errors.New("sealer: Resolver is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Recorder{cfg: cfg, written: map[string]writtenFile{}, wake: make(chan struct{}, 1)}, nil
}

// FileWritten implements Sealer.
func (r *Recorder) FileWritten(rel string, v FileVersion, crc uint32, _ time.Time) {
	if r.cfg.Verifier != nil {
		if local, err := r.cfg.Resolver.Confine(filepath.Join(r.cfg.Backing, rel)); err == nil {
			r.cfg.Verifier.LearnChecksum(local, v, crc)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written[rel] = writtenFile{size: v.Size(), crc: crc, hasChecksum: true}
}

// FileWrittenWithoutChecksum implements Sealer: the file is sealed with its
// size only, or hashed at sealing time with ReadUnwritten.
func (r *Recorder) FileWrittenWithoutChecksum(rel string, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written[rel] = writtenFile{}
}

// FileRemoved implements Sealer.
func (r *Recorder) FileRemoved(rel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.written, rel)
}

// Renamed implements Sealer. It does not know whether oldRel is a file or
// a directory, so it moves the record of oldRel and every record below it
// (a scan of all records: renames are rare, one per checkpoint).
func (r *Recorder) Renamed(oldRel, newRel string, exchange bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if oldRel == newRel {
		return
	}
	moved := r.take(oldRel)
	var swapped map[string]writtenFile
	if exchange {
		swapped = r.take(newRel)
	} else {
		r.take(newRel) // replaced
	}
	for suffix, w := range moved {
		r.written[newRel+suffix] = w
	}
	for suffix, w := range swapped {
		r.written[oldRel+suffix] = w
	}
}

// take removes the records of rel and of everything below it, keyed by
// what follows rel ("" for rel itself). LOCKS_REQUIRED(r.mu)
func (r *Recorder) take(rel string) map[string]writtenFile {
	out := map[string]writtenFile{}
	if w, ok := r.written[rel]; ok {
		delete(r.written, rel)
		out[""] = w
	}
	prefix := rel + "/"
	for p, w := range r.written {
		if strings.HasPrefix(p, prefix) {
			delete(r.written, p)
			out[p[len(rel):]] = w
		}
	}
	return out
}

// MetadataCommitted implements Sealer: it only queues the work.
func (r *Recorder) MetadataCommitted(rel string) {
	r.mu.Lock()
	r.queue = append(r.queue, rel)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run seals queued checkpoints until ctx ends, then seals what is left.
// A seal that fails on the backing file system (an I/O error, no space, a
// checkpoint it cannot read yet) is tried again, after sealRetryMin and
// then twice as long each time up to sealRetryMax, for sealRetryFor; once
// ctx has ended, it is tried once more.
func (r *Recorder) Run(ctx context.Context) {
	var retries []sealRetry
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		queue := r.queue
		r.queue = nil
		r.mu.Unlock()
		now := r.cfg.Now()
		var due []sealRetry
		kept := retries[:0]
		for _, rt := range retries {
			if ctx.Err() != nil || !rt.next.After(now) {
				due = append(due, rt)
			} else {
				kept = append(kept, rt)
			}
		}
		retries = kept
		for _, rel := range queue {
			due = append(due, sealRetry{rel: rel, first: now, delay: sealRetryMin})
		}
		for _, rt := range due {
			chkRel := filepath.Dir(rt.rel)
			p, err := r.Seal(chkRel)
			r.attempts.Add(1)
			if r.cfg.OnSealed != nil {
				r.cfg.OnSealed(chkRel, p, err)
			}
			if err != nil && retryableSeal(err) && ctx.Err() == nil && now.Sub(rt.first) < sealRetryFor {
				rt.next = now.Add(rt.delay)
				rt.delay = min(2*rt.delay, sealRetryMax)
				retries = append(retries, rt)
			}
		}
		if len(queue) > 0 {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := time.Hour
		for _, rt := range retries {
			wait = min(wait, rt.next.Sub(now))
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// sealRetry is a seal to try again.
type sealRetry struct {
	rel         string // the _metadata, relative to Backing
	first, next time.Time
	delay       time.Duration
}

// The retries of a seal that failed on the backing file system.
const (
	sealRetryMin = 500 * time.Millisecond
	sealRetryMax = 30 * time.Second
	sealRetryFor = 30 * time.Minute
)

// ErrNotComplete: Seal refused a checkpoint that its backing directory
// does not hold completely (a file missing or short): a sealed manifest
// vouches for what the primary holds, so none is written.
var ErrNotComplete = errors.New("not complete on the primary")

// retryableSeal reports whether a seal failed on the backing file system
// rather than on the checkpoint: a checkpoint that is gone, does not
// parse or is not complete does not get better by waiting.
func retryableSeal(err error) bool {
	var pe *metadata.ParseError
	return !errors.Is(err, iofs.ErrNotExist) && !errors.As(err, &pe) && !errors.Is(err, ErrNotComplete) && !errors.Is(err, errNotRegular)
}

// Seal writes the sealed manifest of the checkpoint directory chkRel now
// and returns its path.
func (r *Recorder) Seal(chkRel string) (string, error) {
	dir := filepath.Join(r.cfg.Backing, chkRel)
	metaPath := filepath.Join(dir, MetadataFile)
	if r.cfg.Verifier != nil {
		switch v := r.cfg.Verifier.VerifyDir(context.Background(), dir); {
		case v.Complete:
		case v.Unknown:
			return "", fmt.Errorf("seal %s: cannot verify it: %s", chkRel, v.Problems[0])
		default:
			return "", fmt.Errorf("seal %s: %w: %s", chkRel, ErrNotComplete, v.Problems[0])
		}
	}
	size, m, err := r.decodeMetadata(metaPath)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", chkRel, err)
	}
	man := FromMetadata(m, size)
	man.Source = SourceSealed
	man.MetadataChecksum, err = r.checksum(metaPath, size)
	if err != nil {
		return "", err
	}
	files := make([]sealedFile, len(man.Files))
	for i := range man.Files {
		f := &files[i]
		f.File = man.Files[i]
		if f.IsDir() || f.Kind == metadata.KindSegment {
			continue // segments are parts of files shared by many checkpoints
		}
		local, err := r.local(dir, &f.File)
		if err != nil {
			continue // not ours to seal; verification will report it
		}
		if f.Checksum, err = r.checksum(local, f.Size); err != nil {
			return "", err
		}
	}
	out := SealedPath(r.cfg.Backing, chkRel)
	doc := sealedManifest{Manifest: *man, Files: files, Dir: chkRel, SealedAt: r.cfg.Now().UTC()}
	data, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return "", err
	}
	return out, writeFileAtomic(out, data)
}

// decodeMetadata decodes the _metadata at metaPath and returns its size.
// It reads the size fstat finds, as it goes.
func (r *Recorder) decodeMetadata(metaPath string) (int64, *metadata.Metadata, error) {
	f, err := openRegular(r.cfg.Resolver, metaPath)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	m, err := metadata.Decode(f.File, f.size(), metadata.Options{})
	return f.size(), m, err
}

func (r *Recorder) local(dir string, f *File) (string, error) {
	if f.Relative {
		return r.cfg.Resolver.Join(dir, f.Path)
	}
	return r.cfg.Resolver.Local(f.Path)
}

// checksum returns the recorded CRC-32C of a file written through the
// mount with the expected size, or hashes it when configured to; "" means
// size only.
func (r *Recorder) checksum(local string, size int64) (string, error) {
	rel, err := filepath.Rel(r.cfg.Backing, local)
	if err == nil && !strings.HasPrefix(rel, "..") {
		r.mu.Lock()
		w, ok := r.written[rel]
		r.mu.Unlock()
		if ok && w.hasChecksum && w.size == size {
			return FormatChecksum(w.crc), nil
		}
	}
	if !r.cfg.ReadUnwritten {
		return "", nil
	}
	crc, err := crcOfFile(r.cfg.Resolver, local, size)
	if err != nil {
		return "", err
	}
	return FormatChecksum(crc), nil
}

// crcOfFile hashes the file at local, which must have size bytes.
func crcOfFile(res *Resolver, local string, size int64) (uint32, error) {
	f, err := openRegular(res, local)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if f.size() != size {
		return 0, fmt.Errorf("seal: %s has %d bytes, the checkpoint records %d", local, f.size(), size)
	}
	h := NewChecksum()
	_, err = f.copyTo(context.Background(), h)
	return h.Sum32(), err
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it into place.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// checkSealed raises a complete L1 verdict to L3 when a sealed manifest of
// the checkpoint exists and every checksum in it matches, and turns it
// incomplete when one does not. Without a sealed manifest, or with one
// that is not whole yet (it does not parse, or changes while read), it
// changes nothing. What lies at its path is read only when it is a
// regular file within sealedManifestBound: anything else is a problem.
// It returns the inode it found at the manifest's path (0: nothing
// there), which the verdict's watch starts from (sealedWatch); ok is
// false when it could not tell.
func (v *Verifier) checkSealed(ctx context.Context, dir string, verdict *Verdict) (ino uint64, ok bool) {
	if v.cfg.SealedRoot == "" {
		return 0, false
	}
	chkRel, err := filepath.Rel(v.cfg.SealedRoot, dir)
	if err != nil || strings.HasPrefix(chkRel, "..") {
		return 0, false
	}
	rel, _ := filepath.Rel(v.cfg.SealedRoot, SealedPath(v.cfg.SealedRoot, chkRel))
	var data []byte
	f, err := openRegularAt(v.cfg.SealedRoot, rel)
	switch {
	case err == nil:
		ino, ok = f.st.Ino, true
		data, err = f.readAll(ctx, sealedManifestBound(verdict.Manifest))
		f.Close()
	case errors.Is(err, unix.ENOENT):
		ok = true
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, errChanged):
		return ino, ok
	case err != nil:
		p := fileProblem(MetadataFile, err)
		p.Detail = "sealed manifest: " + err.Error()
		verdict.addProblem(*p)
		return ino, ok
	}
	var sealed sealedManifest
	if err := json.Unmarshal(data, &sealed); err != nil {
		// The primary writes sealed manifests whole (rename); one that
		// does not parse is still being replicated here, in place. It
		// says nothing yet: the verdict stays at L1 rather than flapping
		// to incomplete and back.
		return ino, ok
	}
	if sealed.CheckpointID != verdict.CheckpointID {
		verdict.addProblem(Problem{Path: MetadataFile, Kind: ProblemChecksumMismatch, Detail: "sealed manifest of another checkpoint"})
		return ino, ok
	}
	check := func(name, local, want string) {
		if want == "" {
			return
		}
		got, err := v.trustedChecksum(ctx, name, local)
		switch {
		case err != nil:
			verdict.addProblem(*fileProblem(name, err))
		case got != want:
			verdict.addProblem(Problem{Path: name, Kind: ProblemChecksumMismatch, Detail: fmt.Sprintf("sealed %s, found %s", want, got),
				ExpectedChecksum: want, FoundChecksum: got})
		}
	}
	check(MetadataFile, filepath.Join(dir, MetadataFile), sealed.MetadataChecksum)
	for i := range sealed.Files {
		f := &sealed.Files[i]
		if f.Checksum == "" {
			continue
		}
		var local string
		if f.Relative {
			local, err = v.cfg.Resolver.Join(dir, f.Path)
		} else {
			local, err = v.cfg.Resolver.Local(f.Path)
		}
		if err != nil {
			verdict.addProblem(Problem{Path: f.Path, Kind: ProblemOutsideRoot, Detail: err.Error()})
			continue
		}
		check(f.Path, local, f.Checksum)
	}
	if len(verdict.Problems) == 0 {
		verdict.Level = L3
	}
	return ino, ok
}

// LearnChecksum tells v that the file at local, at version ver, has the
// given CRC-32C: a later check of that version does not read it.
func (v *Verifier) LearnChecksum(local string, ver FileVersion, crc32c uint32) {
	v.cache.putChecksum(local, ver, FormatChecksum(crc32c), v.cfg.Now())
}

// sealedWatch is what a reusable verdict watches for its sealed
// manifest: the name in dir on the way to it, and the inode found there
// (0: none).
type sealedWatch struct {
	dir, name string
	ino       uint64
}

// sealedWatch returns the directory holding the sealed manifest of the
// checkpoint directory dir, or the nearest directory above it that
// exists, up to SealedRoot, with the name in it on the way to the
// manifest; nothing without SealedRoot or outside it. The manifest's
// inode is what the verification found there (seen, when ok), so that a
// manifest made since is a change for the next listing.
func (v *Verifier) sealedWatch(dir string, seen uint64, ok bool) sealedWatch {
	if v.cfg.SealedRoot == "" {
		return sealedWatch{}
	}
	chkRel, err := filepath.Rel(v.cfg.SealedRoot, dir)
	if err != nil || strings.HasPrefix(chkRel, "..") {
		return sealedWatch{}
	}
	p := SealedPath(v.cfg.SealedRoot, chkRel)
	var st unix.Stat_t
	w := sealedWatch{dir: filepath.Dir(p), name: filepath.Base(p), ino: seen}
	if !ok && unix.Lstat(p, &st) == nil {
		w.ino = st.Ino
	}
	for w.dir != v.cfg.SealedRoot && len(w.dir) > len(v.cfg.SealedRoot) {
		err := unix.Lstat(w.dir, &st)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return w
		}
		w.ino = 0
		if err == nil {
			w.ino = st.Ino // not a directory
		}
		w.dir, w.name = filepath.Dir(w.dir), filepath.Base(w.dir)
	}
	return w
}

// trustedChecksum is cachedChecksum without opening the file when the
// verifier trusts its version (design §3.6) and knows the checksum of
// that version: path is how checkpoints name it.
func (v *Verifier) trustedChecksum(ctx context.Context, path, local string) (string, error) {
	c := v.cache
	c.pathsMu.Lock()
	e := c.paths[path]
	trusted := e != nil && e.seen != 0
	var ver FileVersion
	if trusted {
		ver = e.ver
	}
	c.pathsMu.Unlock()
	if trusted {
		if sum, ok := c.checksum(local, ver, v.cfg.Now()); ok {
			return sum, nil
		}
	}
	return v.cachedChecksum(ctx, local)
}

// cachedChecksum hashes a file once per version of it (inode, size, times).
func (v *Verifier) cachedChecksum(ctx context.Context, local string) (string, error) {
	f, err := openRegular(v.cfg.Resolver, local)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := VersionOf(&f.st)
	if sum, ok := v.cache.checksum(local, s, v.cfg.Now()); ok {
		return sum, nil
	}
	h := NewChecksum()
	n, err := f.copyTo(ctx, h)
	v.checksummed.Add(uint64(n))
	if err != nil {
		return "", err
	}
	sum := FormatChecksum(h.Sum32())
	v.cache.putChecksum(local, s, sum, v.cfg.Now())
	return sum, nil
}

// sealedManifestBound is the most read of a sealed manifest of the
// checkpoint whose manifest is man. Seal writes the manifest of the
// _metadata it seals, an entry of JSON for each file it references:
// at most 1.9 times the _metadata's bytes that are not inline state, in
// the corpus. The bound is 16 times those bytes, and 1 MiB.
func sealedManifestBound(man *Manifest) int64 {
	const base, perByte = 1 << 20, 16
	if man == nil {
		return base
	}
	return base + perByte*max(man.MetadataSize-man.InlineBytes, 0)
}
