package ckptfs.seqjob;

import java.util.OptionalLong;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;

/**
 * The job's exactly-once sinks (README.md, "Exactly-once sinks"): every record id, tagged with the
 * checkpoint whose commit publishes it, to a Kafka topic through a transactional KafkaSink and to
 * part files through a FileSink. Compiled only into the job built with the Kafka connector
 * (build.sh's third argument); SeqJob reaches it by reflection so that the plain job needs no
 * connector.
 */
public final class EoSinks {

    private EoSinks() {}

    /** Transactional ids are this prefix, the subtask and a counter (the connector's scheme). */
    static final String TRANSACTIONAL_ID_PREFIX = "ckptfs-eo";

    /**
     * Attaches the sinks to the rate-limited sequence; kafka or files may be null (that sink is
     * left out).
     */
    public static void attach(DataStream<Long> seq, String kafka, String topic, String files) {
        DataStream<String> tagged =
                seq.map(new Tagger())
                        .returns(Types.STRING)
                        .setParallelism(1)
                        .name("tag")
                        .uid("ckptfs-eo-tag");
        if (kafka != null) {
            KafkaSink<String> sink =
                    KafkaSink.<String>builder()
                            .setBootstrapServers(kafka)
                            .setRecordSerializer(
                                    KafkaRecordSerializationSchema.builder()
                                            .setTopic(topic)
                                            .setValueSerializationSchema(new SimpleStringSchema())
                                            .build())
                            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                            .setTransactionalIdPrefix(TRANSACTIONAL_ID_PREFIX)
                            // Longer than a failover takes: a transaction the restored
                            // checkpoint left open is committed on the other site.
                            .setProperty("transaction.timeout.ms", "600000")
                            .build();
            tagged.sinkTo(sink).setParallelism(1).name("kafka").uid("ckptfs-eo-kafka");
        }
        if (files != null) {
            FileSink<String> sink =
                    FileSink.forRowFormat(new Path(files), new SimpleStringEncoder<String>("UTF-8"))
                            .withBucketAssigner(new BasePathBucketAssigner<>())
                            .withRollingPolicy(OnCheckpointRollingPolicy.build())
                            .build();
            tagged.sinkTo(sink).setParallelism(1).name("files").uid("ckptfs-eo-files");
        }
    }

    /**
     * "ID TAG": TAG is the checkpoint whose completion commits the record, one past the last
     * checkpoint this function took or restored (0 before any). Chained to the sinks, so the
     * barrier that ends a transaction passes this function at the same point of the stream.
     */
    public static final class Tagger implements MapFunction<Long, String>, CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        private transient long last;

        @Override
        public String map(Long v) {
            return v + " " + (last + 1);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) {
            last = ctx.getCheckpointId();
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) {
            OptionalLong id = ctx.getRestoredCheckpointId();
            last = id.isPresent() ? id.getAsLong() : 0;
        }
    }
}
