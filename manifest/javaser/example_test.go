package javaser_test

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// Build the data of a Flink checkpoint znode (a RetrievableStreamStateHandle
// pointing to an HA file), encode it, and find the file again by walking
// the decoded graph, as a reader of HA files does.
func Example() {
	var jdk javaser.JDK
	path := javaser.NewClassDesc("org.apache.flink.core.fs.Path", 1, javaser.SCSerializable,
		javaser.ObjField("uri", "Ljava/net/URI;"))
	fileHandle := javaser.NewClassDesc("org.apache.flink.runtime.state.filesystem.FileStateHandle", 350284443258002355,
		javaser.SCSerializable, javaser.PrimField('J', "stateSize"), javaser.ObjField("filePath", "Lorg/apache/flink/core/fs/Path;"))
	retrievable := javaser.NewClassDesc("org.apache.flink.runtime.state.RetrievableStreamStateHandle", 314567453677355,
		javaser.SCSerializable, javaser.ObjField("wrappedStreamStateHandle", "Lorg/apache/flink/runtime/state/StreamStateHandle;"))

	znode := javaser.NewObject(retrievable).With("wrappedStreamStateHandle",
		javaser.NewObject(fileHandle).
			With("stateSize", 4242).
			With("filePath", javaser.NewObject(path).With("uri", jdk.URI("hdfs:/flink/ha/completedCheckpoint0a1b2c3d4e5f"))))
	data, err := javaser.Encode(javaser.NewStream(znode))
	if err != nil {
		panic(err)
	}

	s, err := javaser.Decode(data)
	if err != nil {
		panic(err)
	}
	for _, o := range s.Objects() {
		if !strings.HasSuffix(o.ClassName(), "FileStateHandle") {
			continue
		}
		size, _ := javaser.FieldAs[int64](o, "stateSize")
		p, _ := javaser.FieldAs[*javaser.Object](o, "filePath")
		uri, _ := javaser.FieldAs[*javaser.Object](p, "uri")
		name, _ := uri.StringField("string")
		fmt.Println(name, size)
	}
	// Output: hdfs:/flink/ha/completedCheckpoint0a1b2c3d4e5f 4242
}
