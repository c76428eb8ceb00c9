package metadata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// ErrNotEncodable means the Metadata cannot be written as asked: inline
// bytes were not kept, a string is too long for writeUTF, or a field does not
// exist in the requested version.
var ErrNotEncodable = errors.New("metadata cannot be encoded")

// Encode writes m in its version's format, exactly as Flink does. A Metadata
// returned by Decode with KeepInline encodes to the bytes it was read from.
func Encode(w io.Writer, m *Metadata) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	e := &encoder{w: bw, m: m, layout: m.ChannelLayout}
	if e.layout == ChannelLayoutAuto {
		e.layout = ChannelLayout112
	}
	if m.Version < 2 || m.Version > 7 {
		return fmt.Errorf("%w: version %d", ErrNotEncodable, m.Version)
	}
	e.metadata()
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

// encoder writes with a sticky error: after the first failure every write
// is a no-op and Encode returns that failure.
type encoder struct {
	w      *bufio.Writer
	m      *Metadata
	layout ChannelLayout
	err    error
	buf    [8]byte
}

func (e *encoder) setErr(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	if _, err := e.w.Write(b); err != nil {
		e.setErr(err)
	}
}

func (e *encoder) u8(v byte) {
	if e.err == nil {
		e.setErr(e.w.WriteByte(v))
	}
}

func (e *encoder) i32(v int32) {
	binary.BigEndian.PutUint32(e.buf[:4], uint32(v))
	e.bytes(e.buf[:4])
}

func (e *encoder) i64(v int64) {
	binary.BigEndian.PutUint64(e.buf[:8], uint64(v))
	e.bytes(e.buf[:8])
}

func (e *encoder) utf(s string) {
	b := javaser.AppendModifiedUTF8(nil, s)
	if len(b) > 0xFFFF {
		e.setErr(fmt.Errorf("%w: string of %d bytes is longer than writeUTF allows", ErrNotEncodable, len(b)))
		return
	}
	var lb [2]byte
	binary.BigEndian.PutUint16(lb[:], uint16(len(b)))
	e.bytes(lb[:])
	e.bytes(b)
}

func (e *encoder) blob(data []byte, n int32, what string) {
	if int32(len(data)) != n {
		e.setErr(fmt.Errorf("%w: %s has %d bytes of %d (decode with KeepInline)", ErrNotEncodable, what, len(data), n))
		return
	}
	e.bytes(data)
}

func (e *encoder) longs(v []int64) {
	for _, x := range v {
		e.i64(x)
	}
}

func (e *encoder) metadata() {
	m := e.m
	e.i32(Magic)
	e.i32(m.Version)
	e.i64(m.CheckpointID)
	e.i32(int32(len(m.MasterStates)))
	for i := range m.MasterStates {
		e.masterState(&m.MasterStates[i])
	}
	e.i32(int32(len(m.Operators)))
	for i := range m.Operators {
		e.operator(&m.Operators[i])
	}
	if m.Version >= 4 {
		if len(m.Properties) == 0 {
			e.setErr(fmt.Errorf("%w: version %d needs checkpoint properties", ErrNotEncodable, m.Version))
		}
		e.bytes(m.Properties)
	}
}

func (e *encoder) masterState(ms *MasterState) {
	name := javaser.AppendModifiedUTF8(nil, ms.Name)
	e.i32(masterStateMagic)
	e.i32(int32(4 + 2 + len(name) + 4 + len(ms.Data)))
	e.i32(ms.Version)
	e.utf(ms.Name)
	e.i32(int32(len(ms.Data)))
	e.bytes(ms.Data)
}

func (e *encoder) operator(op *Operator) {
	v := e.m.Version
	if v >= 5 {
		e.utf(op.Name)
		e.utf(op.UID)
	}
	e.i64(op.IDLower)
	e.i64(op.IDUpper)
	e.i32(op.Parallelism)
	e.i32(op.MaxParallelism)
	if v == 2 {
		e.i32(op.ChainLength)
	} else {
		e.streamHandle(op.Coordinator)
		if op.FullyFinished {
			e.i32(-1)
			return
		}
	}
	e.i32(int32(len(op.Subtasks)))
	for i := range op.Subtasks {
		st := &op.Subtasks[i]
		if st.Finished {
			e.i32(-st.Index - 1)
			continue
		}
		e.i32(st.Index)
		e.subtask(st)
	}
}

func (e *encoder) subtask(st *Subtask) {
	v := e.m.Version
	if v == 2 {
		e.i64(st.Duration)
		flag := st.LegacyFlag
		if st.Legacy != nil && flag == 0 {
			flag = 1
		}
		e.i32(flag)
		if flag != 0 {
			e.streamHandle(st.Legacy)
		}
	}
	e.operatorSlot(st.ManagedOperatorFlag, st.ManagedOperator)
	e.operatorSlot(st.RawOperatorFlag, st.RawOperator)
	e.keyedHandle(st.ManagedKeyed)
	e.keyedHandle(st.RawKeyed)
	if v >= 3 {
		e.channels(st.InputChannels)
		e.channels(st.OutputChannels)
	}
	if v >= 7 {
		e.u8(st.RefCheckpointMarker)
		if st.RefCheckpointMarker == 1 {
			e.i64(st.RefCheckpointID)
		}
	}
}

// operatorSlot writes the presence flag and, when set, the handle. A handle
// built by hand without a flag gets Flink's flag value 1.
func (e *encoder) operatorSlot(flag int32, h *OperatorHandle) {
	if h != nil && flag == 0 {
		flag = 1
	}
	e.i32(flag)
	if flag != 0 {
		e.operatorHandle(h)
	}
}

func (e *encoder) operatorHandle(h *OperatorHandle) {
	if h == nil || h.Tag == TagNull {
		e.u8(TagNull)
		return
	}
	e.u8(h.Tag)
	e.i32(int32(len(h.States)))
	for i := range h.States {
		s := &h.States[i]
		e.utf(s.Name)
		e.u8(s.Mode)
		e.i32(int32(len(s.Offsets)))
		e.longs(s.Offsets)
	}
	if h.Tag == TagFileMergingOperator {
		e.utf(h.TaskOwnedDir)
		e.utf(h.SharedDir)
		e.u8(h.EmptyFlag)
	}
	e.streamHandle(h.Delegate)
}

func (e *encoder) channels(cs []ChannelHandle) {
	e.i32(int32(len(cs)))
	for i := range cs {
		c := &cs[i]
		if e.m.Version >= 6 {
			e.u8(c.Type)
			if c.Type == ChannelMergedInput || c.Type == ChannelMergedOutput {
				e.i32(c.SubtaskIndex)
				e.i64(c.StateSize)
				e.streamHandle(c.Delegate)
				e.i32(int32(len(c.MergedOffsets)))
				e.bytes(c.MergedOffsets)
				continue
			}
		}
		if e.layout != ChannelLayout111 || e.m.Version >= 6 {
			e.i32(c.SubtaskIndex)
		}
		e.i32(c.A)
		e.i32(c.B)
		e.i32(int32(len(c.Offsets)))
		e.longs(c.Offsets)
		e.i64(c.StateSize)
		e.streamHandle(c.Delegate)
	}
}

func (e *encoder) keyedHandle(h *KeyedHandle) {
	if h == nil {
		e.u8(TagNull)
		return
	}
	e.u8(h.Tag)
	switch h.Tag {
	case TagKeyGroups, TagKeyGroupsV2, TagSavepointKeyGroups:
		e.i32(h.KeyGroupStart)
		e.i32(h.KeyGroupCount)
		if int32(len(h.Offsets)) != h.KeyGroupCount {
			e.setErr(fmt.Errorf("%w: %d offsets for %d key groups", ErrNotEncodable, len(h.Offsets), h.KeyGroupCount))
		}
		e.longs(h.Offsets)
		e.streamHandle(h.Delegate)
		if h.Tag == TagKeyGroupsV2 {
			e.utf(h.StateHandleID)
		}
	case TagIncrementalKeyGroups, TagIncrementalKeyGroupsV2:
		e.i64(h.CheckpointID)
		e.utf(h.BackendID)
		e.i32(h.KeyGroupStart)
		e.i32(h.KeyGroupCount)
		if h.Tag == TagIncrementalKeyGroupsV2 {
			e.i64(h.CheckpointedSize)
		}
		e.streamHandle(h.Meta)
		e.namedHandles(h.Shared)
		e.namedHandles(h.Private)
		if h.Tag == TagIncrementalKeyGroupsV2 {
			e.utf(h.StateHandleID)
		}
	case TagChangelog, TagChangelogV2:
		e.i32(h.KeyGroupStart)
		e.i32(h.KeyGroupCount)
		e.i64(h.CheckpointedSize)
		e.i32(int32(len(h.Materialized)))
		for _, k := range h.Materialized {
			e.keyedHandle(k)
		}
		e.i32(int32(len(h.NonMaterialized)))
		for _, k := range h.NonMaterialized {
			e.keyedHandle(k)
		}
		e.i64(h.MaterializationID)
		if h.Tag == TagChangelogV2 {
			e.i64(h.CheckpointID)
		}
		e.utf(h.StateHandleID)
	case TagChangelogByteIncrement:
		e.i32(h.KeyGroupStart)
		e.i32(h.KeyGroupCount)
		e.i64(h.From)
		e.i64(h.To)
		e.i32(int32(len(h.Changes)))
		for i := range h.Changes {
			c := &h.Changes[i]
			e.i32(c.KeyGroup)
			e.i32(c.DataLen)
			e.blob(c.Data, c.DataLen, "changelog change")
		}
		e.utf(h.StateHandleID)
	case TagChangelogFileIncrement, TagChangelogFileIncrementV2:
		e.i32(h.KeyGroupStart)
		e.i32(h.KeyGroupCount)
		e.i32(int32(len(h.Parts)))
		for _, p := range h.Parts {
			e.i64(p.Offset)
			e.streamHandle(p.Handle)
		}
		e.i64(h.StateSize)
		e.i64(h.CheckpointedSize)
		e.utf(h.StateHandleID)
		if h.Tag == TagChangelogFileIncrementV2 {
			e.utf(h.StorageIdentifier)
		}
	default:
		e.setErr(fmt.Errorf("%w: keyed handle tag %d", ErrNotEncodable, h.Tag))
	}
}

func (e *encoder) namedHandles(l []NamedHandle) {
	e.i32(int32(len(l)))
	for _, nh := range l {
		e.utf(nh.LocalName)
		e.streamHandle(nh.Handle)
	}
}

func (e *encoder) streamHandle(h *StreamHandle) {
	if h == nil {
		e.u8(TagNull)
		return
	}
	e.u8(h.Tag)
	switch h.Tag {
	case TagByteStream:
		e.utf(h.Name)
		e.i32(h.DataLen)
		e.blob(h.Data, h.DataLen, "inline handle "+h.Name)
	case TagFileStream:
		e.i64(h.Size)
		e.utf(h.Path)
	case TagRelativeStream:
		e.utf(h.Path)
		e.i64(h.Size)
	case TagKeyGroups:
		if h.KeyGroups == nil {
			e.setErr(fmt.Errorf("%w: key-groups stream handle without key groups", ErrNotEncodable))
			return
		}
		e.i32(h.KeyGroups.Start)
		e.i32(int32(len(h.KeyGroups.Offsets)))
		e.longs(h.KeyGroups.Offsets)
		e.streamHandle(h.Delegate)
	case TagSegmentFile:
		e.i64(h.Offset)
		e.i64(h.Size)
		e.i32(h.Scope)
		e.utf(h.Path)
		e.utf(h.LogicalFileID)
	case TagEmptySegmentFile:
	default:
		e.setErr(fmt.Errorf("%w: stream handle tag %d", ErrNotEncodable, h.Tag))
	}
}
