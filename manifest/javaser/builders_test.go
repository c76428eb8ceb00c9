package javaser

import (
	"strconv"
	"strings"
)

// Go builders of the graphs that testdata/java/JavaserWriter.java writes.
// They are built from scratch, without decoding anything, so comparing
// their encoding with the JDK's bytes tests the encoder and the builders.

const (
	znodeURI  = "hdfs://namenode:8020/flink/ha/application_1700000000000_0001/completedCheckpoint9f1e2d3c4b5a"
	znodeSize = 4242
	leaderURL = "pekko.tcp://flink@jobmanager-0.flink:6123/user/rpc/dispatcher_1"
)

// flinkClasses holds Flink's descriptors for the znode chain
// (docs/flink-formats.md §1.7).
type flinkClasses struct {
	jdk                  JDK
	retrievable, fsh, fp *ClassDesc
}

func newFlinkClasses() *flinkClasses {
	return &flinkClasses{
		retrievable: NewClassDesc("org.apache.flink.runtime.state.RetrievableStreamStateHandle", 314567453677355, SCSerializable,
			ObjField("wrappedStreamStateHandle", "Lorg/apache/flink/runtime/state/StreamStateHandle;")),
		fsh: NewClassDesc("org.apache.flink.runtime.state.filesystem.FileStateHandle", 350284443258002355, SCSerializable,
			ObjField("filePath", "Lorg/apache/flink/core/fs/Path;"), PrimField('J', "stateSize")),
		fp: NewClassDesc("org.apache.flink.core.fs.Path", 1, SCSerializable,
			ObjField("uri", "Ljava/net/URI;")),
	}
}

func (f *flinkClasses) fileStateHandle(uri string, size int64) *Object {
	return NewObject(f.fsh).
		With("stateSize", size).
		With("filePath", NewObject(f.fp).With("uri", f.jdk.URI(uri)))
}

func (f *flinkClasses) znode(uri string, size int64) *Object {
	return NewObject(f.retrievable).With("wrappedStreamStateHandle", f.fileStateHandle(uri, size))
}

// goStrings builds the first eight items of the "strings" case.
func goStrings() []Content {
	hello := NewString("hello")
	return []Content{
		hello,
		NewString(""),
		NewString("nul\x00byte"),
		NewString("BMP é ß € 中"),
		NewString("non-BMP 𝄞 😀"),
		NewString("lone x\xed\xa0\x80y\xed\xb0\x80z"), // unpaired surrogates U+D800 and U+DC00
		hello,
		NewString("hello"),
	}
}

// longMixed is the third string of the "longstring" case.
var longMixed = strings.Repeat("é😀\x00", 10000)

func bytePattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func goCustom(jdk *JDK) *Object {
	c := NewClassDesc("Custom", 7, SCSerializable|SCWriteMethod,
		ObjField("s", "Ljava/lang/String;"), PrimField('I', "a"))
	o := NewObject(c).With("a", 1).With("s", "f")
	ints, _ := jdk.Array([]int32{7, 8})
	var w ContentWriter
	w.WriteInt32(42)
	if err := w.WriteUTF("extra é𝄞"); err != nil {
		panic(err)
	}
	w.WriteObject(ints)
	w.WriteInt64(-1)
	w.Write(bytePattern(2000))
	w.WriteObject(NewString("after"))
	if err := o.SetAnnotation("Custom", w.Contents()); err != nil {
		panic(err)
	}
	return o
}

func goDerived() *Object {
	base := NewClassDesc("Base", 11, SCSerializable,
		PrimField('I', "x"), ObjField("name", "Ljava/lang/String;"), PrimField('J', "onlyBase"))
	derived := NewClassDesc("Derived", 12, SCSerializable,
		PrimField('I', "x"), ObjField("name", "Ljava/lang/String;"), PrimField('D', "onlyDerived"))
	derived.Super = base
	o := NewObject(derived).With("x", 2).With("name", "derived").With("onlyDerived", 2.5)
	for name, v := range map[string]any{"x": 1, "name": "base", "onlyBase": 5} {
		if err := o.SetIn("Base", name, v); err != nil {
			panic(err)
		}
	}
	return o
}

func goExt(jdk *JDK) *Object {
	o := NewObject(NewClassDesc("Ext", 9, SCExternalizable|SCBlockData))
	var w ContentWriter
	w.WriteInt32(5)
	if err := w.WriteUTF("ext"); err != nil {
		panic(err)
	}
	w.WriteObject(jdk.UUID(1, 2))
	w.WriteBool(true)
	o.Data[0].Annotation = w.Contents()
	return o
}

func goBackrefs(jdk *JDK) *Object {
	node := NewClassDesc("Node", 13, SCSerializable,
		ObjField("self", "LNode;"), ObjField("next", "LNode;"), ObjField("label", "Ljava/lang/String;"))
	a := NewObject(node).With("label", "a")
	b := NewObject(node).With("label", "b")
	a.With("next", b).With("self", a)
	b.With("next", a)
	return jdk.ArrayList(a, b, a)
}

func goJDKBuilt() *Stream {
	var jdk JDK
	small := jdk.HashMap(MapEntry{jdk.Integer(1), NewString("one")})
	var entries []MapEntry
	for i := range 13 { // Integer keys hash to themselves: Java's bucket order is 0..12
		entries = append(entries, MapEntry{jdk.Integer(int32(i)), NewString("v" + strconv.Itoa(i))})
	}
	return NewStream(
		jdk.UUID(-1, 42),
		jdk.URI("hdfs://nn:8020/flink/ha/my%20job/completedCheckpoint0a1b2c3d4e5f"),
		jdk.ArrayList(jdk.Integer(7), jdk.Long(1<<40), jdk.ByteArray([]byte{1, 2, 3})),
		small,
		jdk.HashMap(entries...),
		jdk.HashMap(),
		jdk.Enum("Color", "BLUE"),
	)
}
