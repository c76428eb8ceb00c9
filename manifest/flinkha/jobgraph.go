package flinkha

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// What a recovering JobManager reads besides the checkpoint pointers
// (docs/design.md §5.5.1). Sources, Flink 1.20 and 2.x unless noted:
// flink-runtime .../jobmanager/ZooKeeperJobGraphStoreUtil.java,
// DefaultJobGraphStore.java (1.x) and DefaultExecutionPlanStore.java
// (2.x): the znode jobgraphs/<job> or execution-plans/<job> holds a
// RetrievableStreamStateHandle; .../zookeeper/ZooKeeperStateHandleStore.java
// and .../persistence/filesystem/FileSystemStateStorageHelper.java: the
// handle names <storageDir>/<cluster-id>/submittedJobGraph<hex>
// (submittedExecutionPlan<hex> in 2.x), which holds the Java-serialized
// JobGraph (jobgraph/JobGraph.java) or, in 2.x, an ExecutionPlan: a
// StreamGraph (flink-runtime .../streaming/api/graph/StreamGraph.java) or
// a JobGraph. Both hold the user jars as userJarBlobKeys (a list of
// PermanentBlobKey, blob/BlobKey.java) and the user artifacts as
// userArtifacts (DistributedCache$DistributedCacheEntry, whose blobKey is
// a PermanentBlobKey serialized once more into a byte[]).

const (
	classJobGraph    = "org.apache.flink.runtime.jobgraph.JobGraph"
	classStreamGraph = "org.apache.flink.streaming.api.graph.StreamGraph"
	// classSubmittedJobGraph wraps the JobGraph in Flink 1.4 to 1.9.
	classSubmittedJobGraph = "org.apache.flink.runtime.jobmanager.SubmittedJobGraph"
	classBlobKey           = "org.apache.flink.runtime.blob.BlobKey"
	classPermanentBlob     = "org.apache.flink.runtime.blob.PermanentBlobKey"
	classCacheEntry        = "org.apache.flink.api.common.cache.DistributedCache$DistributedCacheEntry"
	suidGraph              = 1 // JobGraph and StreamGraph both declare 1
)

// BlobKey is a blob of a job in Flink's HA blob store: its SHA-1 and a
// random part that make the file name (blob/BlobKey.java).
type BlobKey struct {
	// Permanent: a PERMANENT_BLOB (jars and artifacts are); the file name
	// starts with blob_p-, a transient one with blob_t-.
	Permanent bool
	// Hash is the SHA-1 of the blob's content, 40 hex digits.
	Hash string
	// Random is the key's AbstractID, 32 hex digits.
	Random string
	// Artifact is the name of a user artifact ("" for a user jar).
	Artifact string
}

// FileName is the blob's file name in the job's blob directory, as
// BlobUtils.getStorageLocationPath names it: blob_<p|t>-<hash>-<random>.
func (k BlobKey) FileName() string {
	t := "t-"
	if k.Permanent {
		t = "p-"
	}
	return "blob_" + t + k.Hash + "-" + k.Random
}

// JobGraph is what a job graph or execution plan HA file holds, as far as
// recovering the job on another site is concerned.
type JobGraph struct {
	// Class is the root's class: JobGraph or StreamGraph.
	Class string
	// JobID is the job's id, 32 hex digits.
	JobID string
	// JobName is the job's name.
	JobName string
	// Blobs are the distinct blobs the job needs, in stream order.
	Blobs []BlobKey
	// Submitted: the HA file held a SubmittedJobGraph (Flink 1.4 to 1.9),
	// which Flink keeps directly in high-availability.storageDir.
	Submitted bool
}

// DecodeJobGraph decodes a job graph (submittedJobGraph<hex>) or
// execution plan (submittedExecutionPlan<hex>) HA file: the stream must
// hold exactly one JobGraph or StreamGraph (before 1.10 wrapped in a
// SubmittedJobGraph) and end at the end of data.
// Every blob key reachable from it is collected, including those of user
// artifacts, which are serialized once more inside the stream.
func DecodeJobGraph(data []byte) (*JobGraph, error) {
	s, err := javaser.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("flinkha: job graph: %w", err)
	}
	if len(s.Contents) == 0 {
		return nil, fmt.Errorf("flinkha: job graph: %w", &javaser.DecodeError{Offset: int64(len(data)), Msg: "truncated: stream ends after its header", Err: javaser.ErrTruncated})
	}
	root, err := s.Object()
	if err != nil {
		return nil, fmt.Errorf("flinkha: job graph: %w", err)
	}
	graph := root
	if root.ClassName() == classSubmittedJobGraph {
		// Flink 1.4 to 1.9 store the JobGraph with its JobInfo.
		if graph, err = javaser.FieldAs[*javaser.Object](root, "jobGraph"); err != nil {
			return nil, fmt.Errorf("flinkha: job graph: %w", err)
		}
		if graph == nil || graph.Class == nil {
			return nil, fmt.Errorf("flinkha: job graph: %s holds no job graph", classSubmittedJobGraph)
		}
	}
	jg := &JobGraph{Class: graph.ClassName(), Submitted: graph != root}
	idField := ""
	switch jg.Class {
	case classJobGraph:
		idField = "jobID"
	case classStreamGraph:
		idField = "jobId"
	default:
		return nil, fmt.Errorf("flinkha: job graph: stream holds a %s, want a JobGraph or StreamGraph", jg.Class)
	}
	if graph.SerialVersionUID() != suidGraph {
		return nil, fmt.Errorf("flinkha: job graph: %s has serialVersionUID %d, want %d", jg.Class, graph.SerialVersionUID(), suidGraph)
	}
	if jg.JobID, err = abstractIDField(graph, idField, classJobID); err != nil {
		return nil, fmt.Errorf("flinkha: job graph: %w", err)
	}
	if name, err := javaser.FieldAs[*javaser.String](graph, "jobName"); err != nil {
		return nil, fmt.Errorf("flinkha: job graph: %w", err)
	} else if name != nil {
		jg.JobName = name.Value
	}
	err = javaser.Walk([]javaser.Content{root}, func(v javaser.Value) error {
		o, ok := v.(*javaser.Object)
		if !ok || o.Class == nil {
			return nil
		}
		switch {
		case o.DataOf(classBlobKey) != nil:
			k, err := blobKey(o)
			if err != nil {
				return err
			}
			jg.addBlob(k)
		case o.ClassName() == classCacheEntry:
			k, ok, err := artifactBlob(o)
			if err != nil {
				return err
			}
			if ok {
				jg.addBlob(k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("flinkha: job graph: %w", err)
	}
	return jg, nil
}

// addBlob adds k unless the same blob is there; an artifact's name
// sticks to the blob.
func (jg *JobGraph) addBlob(k BlobKey) {
	i := slices.IndexFunc(jg.Blobs, func(b BlobKey) bool { return b.FileName() == k.FileName() })
	switch {
	case i < 0:
		jg.Blobs = append(jg.Blobs, k)
	case jg.Blobs[i].Artifact == "":
		jg.Blobs[i].Artifact = k.Artifact
	}
}

// blobKey reads a BlobKey (or subclass) object.
func blobKey(o *javaser.Object) (BlobKey, error) {
	var k BlobKey
	key, err := javaser.FieldAs[*javaser.Array](o, "key")
	if err != nil {
		return k, err
	}
	var b []byte
	if key != nil {
		b, _ = key.Elements.([]byte)
	}
	if len(b) != 20 {
		return k, fmt.Errorf("%s.key is not a 20-byte SHA-1", o.ClassName())
	}
	k.Hash = hex.EncodeToString(b)
	typ, err := javaser.FieldAs[*javaser.Enum](o, "type")
	if err != nil {
		return k, err
	}
	switch {
	case typ == nil:
		return k, fmt.Errorf("%s.type is null", o.ClassName())
	case typ.Name() == "PERMANENT_BLOB":
		k.Permanent = true
	case typ.Name() == "TRANSIENT_BLOB":
	default:
		return k, fmt.Errorf("%s.type is %q, want PERMANENT_BLOB or TRANSIENT_BLOB", o.ClassName(), typ.Name())
	}
	if k.Random, err = abstractIDField(o, "random", ""); err != nil {
		return k, err
	}
	return k, nil
}

// artifactBlob reads the blob key a DistributedCacheEntry holds
// serialized in its blobKey field, if it has one (an artifact not yet
// uploaded has none).
func artifactBlob(o *javaser.Object) (BlobKey, bool, error) {
	raw, err := javaser.FieldAs[*javaser.Array](o, "blobKey")
	if err != nil || raw == nil {
		return BlobKey{}, false, err
	}
	b, ok := raw.Elements.([]byte)
	if !ok {
		return BlobKey{}, false, fmt.Errorf("%s.blobKey is not a byte[]", o.ClassName())
	}
	s, err := javaser.Decode(b)
	if err != nil {
		return BlobKey{}, false, fmt.Errorf("%s.blobKey: %w", o.ClassName(), err)
	}
	ko, err := s.Object()
	if err != nil {
		return BlobKey{}, false, fmt.Errorf("%s.blobKey: %w", o.ClassName(), err)
	}
	if ko.DataOf(classBlobKey) == nil {
		return BlobKey{}, false, fmt.Errorf("%s.blobKey holds a %s, want a blob key", o.ClassName(), ko.ClassName())
	}
	k, err := blobKey(ko)
	if err != nil {
		return BlobKey{}, false, err
	}
	if name, err := javaser.FieldAs[*javaser.String](o, "filePath"); err == nil && name != nil {
		k.Artifact = name.Value
	}
	if k.Artifact == "" {
		k.Artifact = "(artifact)"
	}
	return k, true, nil
}

// abstractIDField reads an AbstractID-like field as 32 hex digits; class,
// when set, is the class it must have.
func abstractIDField(o *javaser.Object, name, class string) (string, error) {
	id, err := objectField(o, name)
	if err != nil {
		return "", err
	}
	if id == nil || (class != "" && id.ClassName() != class) || id.DataOf(classAbstractID) == nil {
		want := class
		if want == "" {
			want = "an " + classAbstractID
		}
		return "", fmt.Errorf("%s.%s is not %s", o.ClassName(), name, strings.TrimPrefix(want, "org.apache.flink."))
	}
	lower, err := javaser.FieldAs[int64](id, "lowerPart")
	if err != nil {
		return "", err
	}
	upper, err := javaser.FieldAs[int64](id, "upperPart")
	if err != nil {
		return "", err
	}
	return idHex(lower, upper), nil
}

// suids of the blob key classes (blob/BlobKey.java,
// blob/PermanentBlobKey.java), as real Flink wrote them.
const (
	suidBlobKey      = 3847117712521785209
	suidPermanentKey = 5614035773213995269
)

// EncodeJobGraph writes a job graph HA file for the Flink emulator: a
// JobGraph (StreamGraph when stream is set) with Flink's class names and
// serialVersionUIDs but only the fields ckptfs reads: jobID (jobId),
// jobName and userJarBlobKeys, each blob a PermanentBlobKey. Real Flink
// writes many more fields; DecodeJobGraph reads both.
func EncodeJobGraph(jobID, jobName string, stream bool, blobs []BlobKey) ([]byte, error) {
	var c classes
	o, err := c.jobGraph(jobID, jobName, stream, blobs)
	if err != nil {
		return nil, err
	}
	return javaser.Encode(javaser.NewStream(o))
}

// suidSubmittedJobGraph is SubmittedJobGraph's serialVersionUID
// (flink-runtime .../jobmanager/SubmittedJobGraph.java, 1.4 to 1.9).
const suidSubmittedJobGraph = 2836099271734771825

// EncodeSubmittedJobGraph writes a job graph HA file as Flink 1.4 to 1.9
// do: a SubmittedJobGraph (fields jobGraph and jobInfo) holding the
// JobGraph EncodeJobGraph writes. Its jobInfo is null: in Flink it is the
// legacy JobManager's JobInfo of the submitting client (its actor
// reference, listening behaviour and start time), which the constructor
// allows to be null and ckptfs never reads.
func EncodeSubmittedJobGraph(jobID, jobName string, blobs []BlobKey) ([]byte, error) {
	var c classes
	graph, err := c.jobGraph(jobID, jobName, false, blobs)
	if err != nil {
		return nil, err
	}
	root := c.plain(classSubmittedJobGraph, suidSubmittedJobGraph, nil,
		obj("jobGraph", "Lorg/apache/flink/runtime/jobgraph/JobGraph;"),
		obj("jobInfo", "Lorg/apache/flink/runtime/jobmanager/JobInfo;"))
	return javaser.Encode(javaser.NewStream(javaser.NewObject(root).With("jobGraph", graph)))
}

// jobGraph is the root object EncodeJobGraph writes.
func (c *classes) jobGraph(jobID, jobName string, stream bool, blobs []BlobKey) (*javaser.Object, error) {
	lower, upper, err := parseID(jobID)
	if err != nil {
		return nil, err
	}
	idField, class := "jobID", classJobGraph
	if stream {
		idField, class = "jobId", classStreamGraph
	}
	root := c.plain(class, suidGraph, nil,
		obj(idField, "Lorg/apache/flink/api/common/JobID;"), obj("jobName", sigString), obj("userJarBlobKeys", "Ljava/util/List;"))
	blobKey := c.plain(classBlobKey, suidBlobKey, nil,
		obj("key", "[B"), obj("random", "Lorg/apache/flink/util/AbstractID;"), obj("type", "Lorg/apache/flink/runtime/blob/BlobKey$BlobType;"))
	perm := c.plain(classPermanentBlob, suidPermanentKey, func() *javaser.ClassDesc { return blobKey })
	var keys []javaser.Value
	for _, k := range blobs {
		hash, err := hex.DecodeString(k.Hash)
		if err != nil || len(hash) != 20 {
			return nil, fmt.Errorf("flinkha: blob hash %q is not 40 hex digits", k.Hash)
		}
		rl, ru, err := parseID(k.Random)
		if err != nil {
			return nil, err
		}
		keys = append(keys, javaser.NewObject(perm).
			With("key", c.jdk.ByteArray(hash)).
			With("random", javaser.NewObject(c.abstractID()).With("lowerPart", rl).With("upperPart", ru)).
			With("type", c.jdk.Enum("org.apache.flink.runtime.blob.BlobKey$BlobType", "PERMANENT_BLOB")))
	}
	return javaser.NewObject(root).
		With(idField, javaser.NewObject(c.jobID()).With("lowerPart", lower).With("upperPart", upper)).
		With("jobName", javaser.NewString(jobName)).
		With("userJarBlobKeys", c.jdk.ArrayList(keys...)), nil
}
