package flinkha

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// DecodeCompletedCheckpoint decodes an HA file completedCheckpoint<hex>:
// the stream must hold exactly one CompletedCheckpoint object and end at
// the end of data. Every file the state handles reference is found by
// walking the whole object graph, whatever holds the handles.
func DecodeCompletedCheckpoint(data []byte) (*CompletedCheckpoint, error) {
	root, err := decodeRoot(data, classCompletedCheckpoint, suidCompletedCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("flinkha: HA file: %w", err)
	}
	fs, err := fieldSetOf(root.Class)
	if err != nil {
		return nil, err
	}
	cc := &CompletedCheckpoint{FieldSet: fs}
	if err := cc.readScalars(root); err != nil {
		return nil, fmt.Errorf("flinkha: HA file: %w", err)
	}

	var metaObj *javaser.Object
	if fs != FieldSet14 {
		if metaObj, err = objectField(root, "metadataHandle"); err != nil {
			return nil, fmt.Errorf("flinkha: HA file: %w", err)
		}
		if metaObj != nil && isFileHandle(metaObj) {
			ref, err := fileRef(metaObj)
			if err != nil {
				return nil, fmt.Errorf("flinkha: HA file: metadata handle: %w", err)
			}
			cc.Metadata = &ref
		}
	}

	changelog, err := changelogFiles(root)
	if err != nil {
		return nil, fmt.Errorf("flinkha: HA file: %w", err)
	}
	type key struct {
		path         string
		size, offset int64
		dir, segment bool
	}
	seen := make(map[key]bool)
	err = javaser.Walk([]javaser.Content{root}, func(v javaser.Value) error {
		o, ok := v.(*javaser.Object)
		if !ok || o.Class == nil {
			return nil
		}
		var ref FileRef
		switch {
		case isFileHandle(o):
			if o.ClassName() == classEmptySegment || o == metaObj {
				return nil
			}
			if ref, err = fileRef(o); err != nil {
				return err
			}
			ref.Changelog = changelog[o]
		case hasClassSuffix(o, "DirectoryStreamStateHandle"):
			p, err := objectField(o, "directory")
			if err != nil {
				return err
			}
			u, err := pathURI(p, o.ClassName()+".directory")
			if err != nil {
				return err
			}
			if ref.Path, err = URIToPath(u); err != nil {
				return err
			}
			ref.Size, ref.Dir, ref.Class = -1, true, o.ClassName()
		case o.DataOf(classByteStream) != nil:
			data, err := javaser.FieldAs[*javaser.Array](o, "data")
			if err != nil {
				return err
			}
			if data != nil {
				if _, ok := data.Elements.([]byte); !ok {
					return fmt.Errorf("flinkha: %s.data is not a byte[]", o.ClassName())
				}
				cc.InlineBytes += int64(data.Len())
			}
			return nil
		default:
			return nil
		}
		if m := cc.Metadata; m != nil && *m == ref {
			return nil // the same metadata file, held by the storage location
		}
		k := key{ref.Path, ref.Size, ref.Offset, ref.Dir, ref.Segment}
		if !seen[k] {
			seen[k] = true
			cc.Files = append(cc.Files, ref)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("flinkha: HA file: %w", err)
	}
	return cc, nil
}

// changelogFiles finds the file handles that are parts of changelog
// state: those a ChangelogStateHandleStreamImpl holds (in its
// handlesAndOffsets), whose files are DSTL files.
func changelogFiles(root *javaser.Object) (map[*javaser.Object]bool, error) {
	files := make(map[*javaser.Object]bool)
	err := javaser.Walk([]javaser.Content{root}, func(v javaser.Value) error {
		o, ok := v.(*javaser.Object)
		if !ok || o.Class == nil || !hasClassSuffix(o, ".ChangelogStateHandleStreamImpl") {
			return nil
		}
		parts, ok := o.Field("handlesAndOffsets")
		if !ok {
			return fmt.Errorf("%s has no handlesAndOffsets", o.ClassName())
		}
		p, ok := parts.(javaser.Value)
		if !ok || p == nil {
			return nil
		}
		return javaser.Walk([]javaser.Content{p}, func(v javaser.Value) error {
			if o, ok := v.(*javaser.Object); ok && o.Class != nil && isFileHandle(o) {
				files[o] = true
			}
			return nil
		})
	})
	return files, err
}

// fieldSetOf tells the field sets apart by the fields the class
// descriptor declares.
func fieldSetOf(c *javaser.ClassDesc) (FieldSet, error) {
	has := func(name string) bool { _, ok := c.Field(name); return ok }
	switch {
	case has("storageLocation") && has("metadataHandle") && has("completionTimestamp") && has("restoredProps"):
		return FieldSet115, nil
	case has("storageLocation") && has("metadataHandle") && has("completionTimestamp"):
		return FieldSet1150, nil
	case has("storageLocation") && has("metadataHandle") && has("duration"):
		return FieldSet15, nil
	case has("externalizedMetadata") && has("duration"):
		return FieldSet14, nil
	}
	names := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		names[i] = f.Name
	}
	return "", fmt.Errorf("flinkha: HA file: unknown CompletedCheckpoint field set (fields %s)", strings.Join(names, ", "))
}

func (cc *CompletedCheckpoint) readScalars(root *javaser.Object) error {
	job, err := objectField(root, "job")
	if err != nil {
		return err
	}
	if job == nil || job.ClassName() != classJobID {
		return errors.New("job is not a JobID")
	}
	lower, err := javaser.FieldAs[int64](job, "lowerPart")
	if err != nil {
		return err
	}
	upper, err := javaser.FieldAs[int64](job, "upperPart")
	if err != nil {
		return err
	}
	cc.JobID = idHex(lower, upper)
	if cc.CheckpointID, err = javaser.FieldAs[int64](root, "checkpointID"); err != nil {
		return err
	}
	if cc.Timestamp, err = javaser.FieldAs[int64](root, "timestamp"); err != nil {
		return err
	}
	if cc.FieldSet == FieldSet115 || cc.FieldSet == FieldSet1150 {
		cc.CompletionTimestamp, err = javaser.FieldAs[int64](root, "completionTimestamp")
	} else {
		var d int64
		d, err = javaser.FieldAs[int64](root, "duration")
		cc.CompletionTimestamp = cc.Timestamp + d
	}
	if err != nil {
		return err
	}
	ptr, err := javaser.FieldAs[*javaser.String](root, "externalPointer")
	if err != nil {
		return err
	}
	if ptr != nil {
		cc.ExternalPointer = ptr.Value
	}
	return nil
}

// idHex formats an AbstractID (JobID, OperatorID) as Flink prints it: the
// bytes of the lower part, then those of the upper part.
func idHex(lower, upper int64) string {
	var b [16]byte
	putBE(b[:8], uint64(lower))
	putBE(b[8:], uint64(upper))
	return hex.EncodeToString(b[:])
}

// parseID reads what idHex writes.
func parseID(s string) (lower, upper int64, err error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return 0, 0, fmt.Errorf("flinkha: id %q is not 32 hex digits", s)
	}
	return int64(getBE(b[:8])), int64(getBE(b[8:])), nil
}

// fileRef reads a FileStateHandle-like object.
func fileRef(o *javaser.Object) (FileRef, error) {
	u, size, err := fileHandleURI(o)
	if err != nil {
		return FileRef{}, err
	}
	p, err := URIToPath(u)
	if err != nil {
		return FileRef{}, err
	}
	if size < -1 {
		return FileRef{}, fmt.Errorf("flinkha: %s %s has size %d", o.ClassName(), p, size)
	}
	ref := FileRef{Path: p, Size: size, Class: o.ClassName()}
	if v, ok := o.Field("startPos"); ok {
		off, ok := v.(int64)
		if !ok || off < 0 || (size > 0 && off > math.MaxInt64-size) {
			return FileRef{}, fmt.Errorf("flinkha: %s %s has start position %v", o.ClassName(), p, v)
		}
		ref.Offset, ref.Segment = off, true
	}
	return ref, nil
}

func hasClassSuffix(o *javaser.Object, suffix string) bool {
	for _, c := range o.Class.Hierarchy() {
		if strings.HasSuffix(c.Name, suffix) {
			return true
		}
	}
	return false
}
