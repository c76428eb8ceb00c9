package ckptfs.seqjob;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.utils.ParameterTool;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.checkpoint.ListCheckpointed;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.SourceFunction;
import org.apache.flink.util.Collector;

/**
 * The sequence job of ../src for the API of Flink 1.4 to 1.13, with the
 * same state function and report format (README.md), so that the same Go
 * code checks a restore: a SourceFunction with ListCheckpointed instead
 * of NumberSequenceSource (FLIP-27, 1.12), a RichFlatMapFunction with
 * CheckpointedFunction and keyed ValueState instead of a
 * KeyedProcessFunction. Flink 1.4 tells a restored function only that it
 * was restored, not from which checkpoint: "restore" lines say
 * checkpoint=unknown. The state backend comes from the cluster's
 * configuration, but for --rocksdb-incremental URI: RocksDB with
 * incremental checkpoints into URI, which Flink 1.4 turns on only in a
 * job's code (its RocksDBStateBackendFactory reads no key for it),
 * through reflection so that the job needs no RocksDB module at compile
 * time. The checkpoint interval comes from --interval (1.4 has no key
 * for it). The job sets no restart strategy, as most jobs do not: with
 * checkpointing on, 1.4 then restarts it for ever, 10 s apart.
 */
public final class SeqJob {
    public static void main(String[] args) throws Exception {
        ParameterTool p = ParameterTool.fromArgs(args);
        long rate = p.getLong("rate", 500);
        long keys = p.getLong("keys", 64);
        int parallelism = p.getInt("parallelism", 2);
        int payload = p.getInt("payload", 0);
        long interval = p.getLong("interval", 1000);
        String report = p.get("report", "");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(interval);
        if (p.has("rocksdb-incremental")) {
            incrementalRocksDB(env, p.get("rocksdb-incremental"));
        }
        env.addSource(new Seq(rate)).name("seq").uid("ckptfs-seq-source").setParallelism(1)
                .keyBy(new ByKey(keys))
                .flatMap(new StateFn(keys, payload, report)).name("state").uid("ckptfs-state").setParallelism(parallelism)
                .addSink(new DiscardingSink<Long>()).name("sink").uid("ckptfs-sink").setParallelism(parallelism);
        env.execute(p.get("name", "ckptfs-seqjob"));
    }

    /** env.setStateBackend(new RocksDBStateBackend(uri, true)). */
    static void incrementalRocksDB(StreamExecutionEnvironment env, String uri) throws Exception {
        Object backend = Class.forName("org.apache.flink.contrib.streaming.state.RocksDBStateBackend")
                .getConstructor(String.class, boolean.class).newInstance(uri, true);
        for (java.lang.reflect.Method m : env.getClass().getMethods()) {
            if (m.getName().equals("setStateBackend") && m.getParameterCount() == 1
                    && m.getParameterTypes()[0].isInstance(backend)) {
                m.invoke(env, backend);
                return;
            }
        }
        throw new IllegalStateException("no StreamExecutionEnvironment.setStateBackend takes " + backend.getClass());
    }

    static long splitmix64(long x) {
        long z = x + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static void payload(byte[] out, long hash, long k, int b) {
        long x = hash ^ k;
        for (int j = 0; 8 * j < b; j++) {
            x = splitmix64(x);
            for (int i = 0; i < 8 && 8 * j + i < b; i++) {
                out[16 + 8 * j + i] = (byte) (x >>> (8 * i));
            }
        }
    }

    static long getLE(byte[] b, int off) {
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (b[off + i] & 0xff);
        }
        return v;
    }

    static void putLE(byte[] b, int off, long v) {
        for (int i = 0; i < 8; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    /** 0, 1, 2, ...: record n released no earlier than start + n/rate. */
    static final class Seq implements SourceFunction<Long>, ListCheckpointed<Long> {
        private final long rate;
        private volatile boolean running = true;
        private long next;

        Seq(long rate) {
            this.rate = rate;
        }

        @Override
        public void run(SourceContext<Long> ctx) throws Exception {
            long start = System.nanoTime();
            long sent = 0;
            while (running) {
                if (rate > 0) {
                    long due = start + sent * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                    }
                }
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(next);
                    next++;
                }
                sent++;
            }
        }

        @Override
        public void cancel() {
            running = false;
        }

        @Override
        public List<Long> snapshotState(long checkpointId, long timestamp) {
            return Collections.singletonList(next);
        }

        @Override
        public void restoreState(List<Long> state) {
            for (Long v : state) {
                next = v;
            }
        }
    }

    static final class ByKey implements KeySelector<Long, Long> {
        private final long keys;

        ByKey(long keys) {
            this.keys = keys;
        }

        @Override
        public Long getKey(Long v) {
            return v % keys;
        }
    }

    /** The state function of README.md, with its report. */
    static final class StateFn extends RichFlatMapFunction<Long, Long> implements CheckpointedFunction {
        private final long keys;
        private final int payload;
        private final String report;
        private transient ValueState<byte[]> seq;
        private transient Set<Long> seen;
        private transient long maxSeen;
        private transient OutputStream out;

        StateFn(long keys, int payload, String report) {
            this.keys = keys;
            this.payload = payload;
            this.report = report;
        }

        private synchronized void line(String s) throws IOException {
            byte[] b = (s + "\n").getBytes(StandardCharsets.UTF_8);
            if (report.isEmpty()) {
                System.out.write(b);
                System.out.flush();
                return;
            }
            if (out == null) {
                out = new FileOutputStream(report, true);
            }
            out.write(b);
        }

        private int subtask() {
            return getRuntimeContext().getIndexOfThisSubtask();
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            seq = ctx.getKeyedStateStore().getState(new ValueStateDescriptor<>("seq", BytePrimitiveArraySerializer.INSTANCE));
            seen = new HashSet<>();
            maxSeen = -1;
            if (ctx.isRestored()) {
                line("restore subtask=" + subtask() + " checkpoint=unknown");
            } else {
                line("start subtask=" + subtask());
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            line("snapshot subtask=" + subtask() + " checkpoint=" + ctx.getCheckpointId() + " maxseen=" + maxSeen);
        }

        @Override
        public void flatMap(Long v, Collector<Long> collector) throws Exception {
            long k = v % keys;
            byte[] cur = seq.value();
            long count = 0, hash = 0;
            if (cur != null) {
                byte[] want = new byte[16 + payload];
                count = getLE(cur, 0);
                hash = getLE(cur, 8);
                payload(want, hash, k, payload);
                boolean ok = cur.length == 16 + payload;
                for (int i = 16; ok && i < cur.length; i++) {
                    ok = cur[i] == want[i];
                }
                if (!ok) {
                    line("corrupt subtask=" + subtask() + " key=" + k + " at=" + v);
                    throw new IllegalStateException("corrupt state of key " + k + " at " + v);
                }
            }
            if (seen.add(k)) {
                line("key=" + k + " first=" + v + " count=" + count + " hash=" + Long.toUnsignedString(hash));
            }
            hash = splitmix64(hash ^ v);
            count++;
            byte[] next = new byte[16 + payload];
            putLE(next, 0, count);
            putLE(next, 8, hash);
            payload(next, hash, k, payload);
            seq.update(next);
            maxSeen = Math.max(maxSeen, v);
        }
    }
}
