package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

func newInspectCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "inspect [-o json] PATH",
		Short: "Summarize a _metadata file: checkpoint id, operators, referenced files",
		Long: `Inspect parses a Flink _metadata file (PATH is the file or a directory
holding it) and prints its checkpoint id, format version, operators, every
file it references and the state stored inline. It reads only a regular
file, never through a symbolic link.

Exit status: 0 on success, 3 when the file cannot be read or parsed (the
error, with its byte offset, goes to stderr).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				path = filepath.Join(path, manifest.MetadataFile)
			}
			f, size, err := openMetadata(path)
			if err != nil {
				return fail("%v", err)
			}
			defer f.Close()
			m, err := metadata.Decode(f, size, metadata.Options{})
			if err != nil {
				return fail("%s: %v", path, err)
			}
			report := newInspectReport(path, size, m)
			if out == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(report)
			}
			report.writeText(cmd.OutOrStdout())
			return nil
		},
	}
	addOutputFlag(cmd, &out)
	return cmd
}

// openMetadata opens the _metadata file at path for reading, and returns
// its size. A symbolic link is refused, not followed (a checkpoint
// directory may be written by anyone with access to the storage), and so
// is anything but a regular file (opening does not wait for a FIFO).
func openMetadata(path string) (*os.File, int64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); errors.Is(err, unix.ELOOP) && lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, 0, fmt.Errorf("%s is a symbolic link: inspect does not follow symbolic links", path)
		}
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	// A regular file: reads block as usual.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, 0, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), st.Size, nil
}

type inspectReport struct {
	Path            string            `json:"path"`
	Size            int64             `json:"size"`
	CheckpointID    int64             `json:"checkpoint_id"`
	MetadataVersion int32             `json:"metadata_version"`
	MasterStates    int               `json:"master_states"`
	Operators       []inspectOperator `json:"operators"`
	Files           []inspectFile     `json:"files"`
	DistinctFiles   int               `json:"distinct_files"`
	FileBytes       int64             `json:"file_bytes"`
	InlineCount     int               `json:"inline_count"`
	InlineBytes     int64             `json:"inline_bytes"`
}

type inspectOperator struct {
	ID               string `json:"id"`
	Name             string `json:"name,omitempty"`
	UID              string `json:"uid,omitempty"`
	Parallelism      int32  `json:"parallelism"`
	MaxParallelism   int32  `json:"max_parallelism"`
	Subtasks         int    `json:"subtasks"`
	FinishedSubtasks int    `json:"finished_subtasks"`
	FullyFinished    bool   `json:"fully_finished"`
}

type inspectFile struct {
	Path     string        `json:"path"`
	Resolved string        `json:"resolved"`
	Relative bool          `json:"relative"`
	Size     int64         `json:"size"`
	Offset   int64         `json:"offset,omitempty"`
	Kind     metadata.Kind `json:"kind"`
}

func newInspectReport(path string, size int64, m *metadata.Metadata) *inspectReport {
	r := &inspectReport{
		Path: path, Size: size, CheckpointID: m.CheckpointID, MetadataVersion: m.Version,
		MasterStates: len(m.MasterStates), Operators: []inspectOperator{}, Files: []inspectFile{},
	}
	for i := range m.Operators {
		op := &m.Operators[i]
		io := inspectOperator{
			ID: op.OperatorIDString(), Name: op.Name, UID: op.UID,
			Parallelism: op.Parallelism, MaxParallelism: op.MaxParallelism,
			Subtasks: len(op.Subtasks), FullyFinished: op.FullyFinished,
		}
		for _, st := range op.Subtasks {
			if st.Finished {
				io.FinishedSubtasks++
			}
		}
		r.Operators = append(r.Operators, io)
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		abs = filepath.Dir(path)
	}
	for _, ref := range m.References(abs) {
		r.Files = append(r.Files, inspectFile{Path: ref.Path, Resolved: ref.Resolved, Relative: ref.Relative, Size: ref.Size, Offset: ref.Offset, Kind: ref.Kind})
	}
	man := manifest.FromMetadata(m, size)
	r.DistinctFiles = len(man.Files)
	r.FileBytes = man.Bytes()
	r.InlineCount, r.InlineBytes = man.InlineCount, man.InlineBytes
	return r
}

func (r *inspectReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "%s (%d bytes)\n", r.Path, r.Size)
	fmt.Fprintf(w, "checkpoint %d, metadata version %d, %d master states\n", r.CheckpointID, r.MetadataVersion, r.MasterStates)
	fmt.Fprintf(w, "files: %d references to %d distinct files, %d bytes; inline: %d handles, %d bytes\n",
		len(r.Files), r.DistinctFiles, r.FileBytes, r.InlineCount, r.InlineBytes)
	fmt.Fprintf(w, "\noperators (%d):\n", len(r.Operators))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tPARALLELISM\tSUBTASKS\tFINISHED\tNAME\tUID")
	for _, op := range r.Operators {
		finished := fmt.Sprint(op.FinishedSubtasks)
		if op.FullyFinished {
			finished = "all"
		}
		fmt.Fprintf(tw, "  %s\t%d/%d\t%d\t%s\t%s\t%s\n", op.ID, op.Parallelism, op.MaxParallelism, op.Subtasks, finished, dash(op.Name), dash(op.UID))
	}
	tw.Flush()
	if len(r.Files) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfiles:\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KIND\tSIZE\tPATH")
	for _, f := range r.Files {
		p := f.Path
		if f.Relative {
			p = "./" + p
		}
		if f.Kind == metadata.KindSegment {
			p = fmt.Sprintf("%s @%d", p, f.Offset)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", f.Kind, f.Size, p)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
