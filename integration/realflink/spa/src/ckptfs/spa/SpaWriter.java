package ckptfs.spa;

import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.state.api.StateBootstrapTransformation;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Writes a savepoint with the State Processor API (SavepointWriter) for the corpus: keyed state
 * for the seqjob's "ckptfs-state" operator (a byte[] per key, as the job keeps it), in an embedded
 * MiniCluster. Usage: SpaWriter SAVEPOINT_DIR KEYS [KEY=VALUE...] (Flink settings of the job).
 */
public final class SpaWriter {
    private SpaWriter() {}

    public static void main(String[] argv) throws Exception {
        String dir = argv[0];
        long keys = Long.parseLong(argv[1]);
        Configuration conf = new Configuration();
        for (int i = 2; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            conf.setString(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        DataStream<Long> data = env.fromSequence(0, keys - 1);
        StateBootstrapTransformation<Long> state =
                OperatorTransformation.bootstrapWith(data)
                        .keyBy(new Identity(), Types.LONG)
                        .transform(new Bootstrap());
        withOperator(newSavepoint(env, new HashMapStateBackend(), 128), "ckptfs-state", state)
                .write(dir);
        env.execute("ckptfs-spa-writer");
    }

    /**
     * SavepointWriter.newSavepoint with the environment (1.17 and later), or without it (1.15, 1.16:
     * the transformations bring their environment).
     */
    static SavepointWriter newSavepoint(StreamExecutionEnvironment env, StateBackend backend, int maxParallelism)
            throws Exception {
        try {
            return (SavepointWriter)
                    SavepointWriter.class
                            .getMethod("newSavepoint", StreamExecutionEnvironment.class, StateBackend.class, int.class)
                            .invoke(null, env, backend, maxParallelism);
        } catch (NoSuchMethodException e) {
            return (SavepointWriter)
                    SavepointWriter.class
                            .getMethod("newSavepoint", StateBackend.class, int.class)
                            .invoke(null, backend, maxParallelism);
        }
    }

    /**
     * withOperator by OperatorIdentifier.forUid (1.17 and later; 2.x has no other), or by the uid
     * string (1.15, 1.16, which have no OperatorIdentifier).
     */
    static SavepointWriter withOperator(SavepointWriter w, String uid, StateBootstrapTransformation<?> t)
            throws Exception {
        Class<?> id;
        try {
            id = Class.forName("org.apache.flink.state.api.OperatorIdentifier");
        } catch (ClassNotFoundException e) {
            return (SavepointWriter)
                    SavepointWriter.class
                            .getMethod("withOperator", String.class, StateBootstrapTransformation.class)
                            .invoke(w, uid, t);
        }
        Object ident = id.getMethod("forUid", String.class).invoke(null, uid);
        return (SavepointWriter)
                SavepointWriter.class
                        .getMethod("withOperator", id, StateBootstrapTransformation.class)
                        .invoke(w, ident, t);
    }

    /** The key is the value. */
    public static final class Identity implements KeySelector<Long, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long getKey(Long v) {
            return v;
        }
    }

    /** Gives each key a 16-byte state (count 1, hash = key), the seqjob's layout. */
    public static final class Bootstrap extends KeyedStateBootstrapFunction<Long, Long> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<byte[]> state;

        @Override
        public void processElement(Long v, Context ctx) throws Exception {
            if (state == null) { // open(...) differs between 1.x and 2.x
                state =
                        getRuntimeContext()
                                .getState(
                                        new ValueStateDescriptor<>(
                                                "seq", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
            }
            byte[] b = new byte[16];
            b[0] = 1;
            for (int i = 0; i < 8; i++) {
                b[8 + i] = (byte) (v >>> (8 * i));
            }
            state.update(b);
        }
    }
}
