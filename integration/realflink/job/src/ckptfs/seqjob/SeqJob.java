package ckptfs.seqjob;

import java.io.File;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.BroadcastStream;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.BroadcastProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Deterministic, stateful streaming job for the ckptfs real-Flink integration tests.
 *
 * <p>One source compiles against Flink 1.15 .. 2.3: it only uses DataStream API calls whose
 * signatures are identical in all those releases (see README.md). The job never configures
 * checkpointing or state backends itself; that comes from the cluster configuration, except in
 * the optional, clearly separated "local" mode (--local-* / --restore-from), which is meant only
 * for running the job in an embedded MiniCluster by hand.
 */
public final class SeqJob {

    private SeqJob() {}

    // ---------------------------------------------------------------- arguments

    static final class Args {
        long rate = 500;
        int keys = 64;
        int parallelism = 2;
        int payload = 0;
        String report = null;
        String name = "ckptfs-seqjob";
        // corpus kinds (integration/realflink corpus_test.go); off by default
        long slowMs = 0;
        int broadcast = 0;
        // exactly-once sinks (src-eo, EoSinks); off by default
        String kafka = null;
        String kafkaTopic = "ckptfs-eo";
        String fileSink = null;
        // local (MiniCluster) mode only
        String localCheckpointDir = null;
        long localCheckpointIntervalMs = 1000;
        String restoreFrom = null;
        String localConf = null;

        boolean localMode() {
            return localCheckpointDir != null || restoreFrom != null || localConf != null;
        }
    }

    static Args parseArgs(String[] argv) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            if (!k.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + k);
            }
            if (i + 1 >= argv.length) {
                throw new IllegalArgumentException("missing value for " + k);
            }
            String v = argv[++i];
            switch (k) {
                case "--rate":
                    a.rate = Long.parseLong(v);
                    break;
                case "--keys":
                    a.keys = Integer.parseInt(v);
                    break;
                case "--parallelism":
                    a.parallelism = Integer.parseInt(v);
                    break;
                case "--payload":
                    a.payload = Integer.parseInt(v);
                    break;
                case "--report":
                    a.report = v;
                    break;
                case "--name":
                    a.name = v;
                    break;
                case "--slow-ms":
                    a.slowMs = Long.parseLong(v);
                    break;
                case "--broadcast":
                    a.broadcast = Integer.parseInt(v);
                    break;
                case "--kafka":
                    a.kafka = v;
                    break;
                case "--kafka-topic":
                    a.kafkaTopic = v;
                    break;
                case "--file-sink":
                    a.fileSink = v;
                    break;
                case "--local-checkpoint-dir":
                    a.localCheckpointDir = v;
                    break;
                case "--local-checkpoint-interval":
                    a.localCheckpointIntervalMs = Long.parseLong(v);
                    break;
                case "--restore-from":
                    a.restoreFrom = v;
                    break;
                case "--local-conf":
                    a.localConf = v;
                    break;
                default:
                    throw new IllegalArgumentException("unknown option: " + k);
            }
        }
        if (a.keys <= 0) {
            throw new IllegalArgumentException("--keys must be > 0");
        }
        if (a.parallelism <= 0) {
            throw new IllegalArgumentException("--parallelism must be > 0");
        }
        if (a.payload < 0) {
            throw new IllegalArgumentException("--payload must be >= 0");
        }
        return a;
    }

    /** Configuration for the embedded MiniCluster; used only when a --local-* option is given. */
    static Configuration localConfiguration(Args a) {
        Map<String, String> m = new LinkedHashMap<>();
        if (a.localCheckpointDir != null) {
            // Keys valid in 1.15 (primary) and 2.x (primary or deprecated fallback).
            m.put("state.checkpoints.dir", new File(a.localCheckpointDir).getAbsoluteFile().toURI().toString());
            m.put("execution.checkpointing.interval", a.localCheckpointIntervalMs + " ms");
            m.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        }
        if (a.restoreFrom != null) {
            m.put("execution.savepoint.path", a.restoreFrom);
        }
        if (a.localConf != null && !a.localConf.isEmpty()) {
            for (String kv : a.localConf.split(",")) {
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("--local-conf entry is not k=v: " + kv);
                }
                m.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        }
        return Configuration.fromMap(m);
    }

    // ---------------------------------------------------------------- main

    public static void main(String[] argv) throws Exception {
        Args a = parseArgs(argv);

        StreamExecutionEnvironment env =
                a.localMode()
                        ? StreamExecutionEnvironment.getExecutionEnvironment(localConfiguration(a))
                        : StreamExecutionEnvironment.getExecutionEnvironment();

        DataStream<Long> seq =
                env.fromSource(
                                new NumberSequenceSource(0L, Long.MAX_VALUE),
                                WatermarkStrategy.<Long>noWatermarks(),
                                "seq")
                        .setParallelism(1)
                        .uid("ckptfs-seq-source");

        DataStream<Long> limited =
                seq.map(new RateLimiter(a.rate))
                        .returns(Types.LONG)
                        .setParallelism(1)
                        .name("rate-limit")
                        .uid("ckptfs-rate-limit");

        DataStream<Long> processed =
                limited.keyBy(new ModKey(a.keys), Types.LONG)
                        .process(new StateFn(a.keys, a.payload, a.report), Types.LONG)
                        .setParallelism(a.parallelism)
                        .name("state")
                        .uid("ckptfs-state");

        processed
                .filter(a.slowMs > 0 ? new SlowNever(a.slowMs) : new Never())
                .setParallelism(a.parallelism)
                .name("drop-all")
                .uid("ckptfs-drop-all")
                .print()
                .setParallelism(a.parallelism)
                .name("sink")
                .uid("ckptfs-sink");

        if (a.kafka != null || a.fileSink != null) {
            // Only the job built with the Kafka connector has EoSinks.
            Class.forName("ckptfs.seqjob.EoSinks")
                    .getMethod("attach", DataStream.class, String.class, String.class, String.class)
                    .invoke(null, limited, a.kafka, a.kafkaTopic, a.fileSink);
        }

        if (a.broadcast > 0) {
            // A bounded source that finishes (a job with finished tasks)
            // feeding broadcast state; the rate-limited stream keeps the
            // broadcast operator running.
            BroadcastStream<Long> rules =
                    env.fromSequence(0, a.broadcast - 1)
                            .setParallelism(1)
                            .name("rules")
                            .uid("ckptfs-rules")
                            .broadcast(RULES);
            limited.connect(rules)
                    .process(new KeepRules(), Types.LONG)
                    .setParallelism(a.parallelism)
                    .name("broadcast")
                    .uid("ckptfs-broadcast")
                    .print()
                    .setParallelism(a.parallelism)
                    .name("broadcast-sink")
                    .uid("ckptfs-broadcast-sink");
        }

        env.execute(a.name);
    }

    static final MapStateDescriptor<Long, Long> RULES =
            new MapStateDescriptor<>("rules", Types.LONG, Types.LONG);

    /** Keeps every broadcast element in broadcast state; emits nothing. */
    public static final class KeepRules extends BroadcastProcessFunction<Long, Long, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public void processElement(Long v, ReadOnlyContext ctx, Collector<Long> out) {}

        @Override
        public void processBroadcastElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            ctx.getBroadcastState(RULES).put(v, v * v);
        }
    }

    /** Drops everything, slowly: the upstream channels fill (backpressure). */
    public static final class SlowNever implements FilterFunction<Long> {
        private static final long serialVersionUID = 1L;
        private final long ms;

        public SlowNever(long ms) {
            this.ms = ms;
        }

        @Override
        public boolean filter(Long v) throws Exception {
            Thread.sleep(ms);
            return false;
        }
    }

    // ---------------------------------------------------------------- functions

    /** Key selector v -> v % K. */
    public static final class ModKey implements KeySelector<Long, Long> {
        private static final long serialVersionUID = 1L;
        private final long k;

        public ModKey(long k) {
            this.k = k;
        }

        @Override
        public Long getKey(Long v) {
            return v % k;
        }
    }

    /** Drops everything, so the print sink never prints. */
    public static final class Never implements FilterFunction<Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public boolean filter(Long v) {
            return false;
        }
    }

    /**
     * Passes about {@code rate} records per second. The schedule is anchored at the first record
     * (record n is released no earlier than start + n/rate seconds), so sleep overshoot does not
     * accumulate. rate <= 0 disables the limiter.
     */
    public static final class RateLimiter implements MapFunction<Long, Long> {
        private static final long serialVersionUID = 1L;
        private final long rate;
        private transient long startNanos;
        private transient long n;
        private transient boolean started;

        public RateLimiter(long rate) {
            this.rate = rate;
        }

        @Override
        public Long map(Long v) throws Exception {
            if (rate <= 0) {
                return v;
            }
            if (!started) {
                started = true;
                startNanos = System.nanoTime();
                n = 0;
            }
            // due = start + n/rate seconds, computed without overflow.
            long due = startNanos + (n / rate) * 1_000_000_000L + ((n % rate) * 1_000_000_000L) / rate;
            n++;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
            }
            return v;
        }
    }

    /**
     * Per key k holds a byte[] value: count (8 bytes LE), hash (8 bytes LE), payload (B bytes).
     * See README.md for the exact state function.
     */
    public static final class StateFn extends KeyedProcessFunction<Long, Long, Long>
            implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;

        private final long keys;
        private final int payloadBytes;
        private final String report;

        private transient ValueState<byte[]> state;
        private transient Set<Long> touched;
        private transient long maxSeen;
        private transient int subtask;

        public StateFn(long keys, int payloadBytes, String report) {
            this.keys = keys;
            this.payloadBytes = payloadBytes;
            this.report = report;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            subtask = subtaskIndex(getRuntimeContext());
            touched = new HashSet<>();
            maxSeen = -1;
            if (ctx.isRestored()) {
                OptionalLong id = ctx.getRestoredCheckpointId();
                Report.write(
                        report,
                        "restore subtask=" + subtask + " checkpoint="
                                + (id.isPresent() ? Long.toString(id.getAsLong()) : "unknown"));
            } else {
                Report.write(report, "start subtask=" + subtask);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            Report.write(
                    report,
                    "snapshot subtask=" + subtask + " checkpoint=" + ctx.getCheckpointId()
                            + " maxseen=" + maxSeen);
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<Long> out) throws Exception {
            if (state == null) {
                // Lazily, so that open() (whose signature differs between releases) is not needed.
                state = getRuntimeContext().getState(
                        new ValueStateDescriptor<>("seq", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
            }
            long v = value;
            long k = ctx.getCurrentKey();

            byte[] cur = state.value();
            long count = 0;
            long hash = 0;
            if (cur != null) {
                if (cur.length < 16) {
                    corrupt(k, v, "state is only " + cur.length + " bytes");
                }
                count = getLong(cur, 0);
                hash = getLong(cur, 8);
            }

            if (touched.add(k)) {
                Report.write(report, "key=" + k + " first=" + v + " count=" + count
                        + " hash=" + Long.toUnsignedString(hash));
            }

            if (cur != null) {
                if (cur.length != 16 + payloadBytes) {
                    corrupt(k, v, "state is " + cur.length + " bytes, want " + (16 + payloadBytes));
                }
                if (!payloadMatches(cur, 16, payloadBytes, hash, k)) {
                    corrupt(k, v, "payload does not match its (hash,key) regeneration, count="
                            + count + " hash=" + Long.toUnsignedString(hash));
                }
            }

            hash = splitmix64(hash ^ v);
            count += 1;
            byte[] next = new byte[16 + payloadBytes];
            putLong(next, 0, count);
            putLong(next, 8, hash);
            fillPayload(next, 16, payloadBytes, hash, k);
            state.update(next);

            if (v > maxSeen) {
                maxSeen = v;
            }
            // Nothing is emitted downstream on purpose.
        }

        private void corrupt(long k, long v, String why) {
            String msg = "corrupt subtask=" + subtask + " key=" + k + " at=" + v;
            Report.write(report, msg);
            throw new IllegalStateException("ckptfs-seqjob: " + msg + ": " + why);
        }
    }

    // ---------------------------------------------------------------- state function helpers

    public static long splitmix64(long x) {
        long z = x + 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** payload: x = hash ^ k; for each 8-byte word j: x = splitmix64(x); bytes = LE(x), truncated at len. */
    static void fillPayload(byte[] dst, int off, int len, long hash, long k) {
        long x = hash ^ k;
        for (int i = 0; i < len; i += 8) {
            x = splitmix64(x);
            int n = Math.min(8, len - i);
            for (int b = 0; b < n; b++) {
                dst[off + i + b] = (byte) (x >>> (8 * b));
            }
        }
    }

    static boolean payloadMatches(byte[] src, int off, int len, long hash, long k) {
        long x = hash ^ k;
        for (int i = 0; i < len; i += 8) {
            x = splitmix64(x);
            int n = Math.min(8, len - i);
            for (int b = 0; b < n; b++) {
                if (src[off + i + b] != (byte) (x >>> (8 * b))) {
                    return false;
                }
            }
        }
        return true;
    }

    static void putLong(byte[] b, int off, long v) {
        for (int i = 0; i < 8; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    static long getLong(byte[] b, int off) {
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v |= (b[off + i] & 0xFFL) << (8 * i);
        }
        return v;
    }

    // ---------------------------------------------------------------- compatibility

    /**
     * Index of this parallel subtask. Flink 1.15-1.18 only have RuntimeContext#getIndexOfThisSubtask();
     * Flink 2.x removed it and only has RuntimeContext#getTaskInfo().getIndexOfThisSubtask()
     * (getTaskInfo() exists since 1.19). No single call compiles everywhere, so this uses
     * reflection on those two public methods.
     */
    static int subtaskIndex(RuntimeContext rc) throws Exception {
        try {
            Method getTaskInfo = RuntimeContext.class.getMethod("getTaskInfo");
            Object info = getTaskInfo.invoke(rc);
            Method idx = getTaskInfo.getReturnType().getMethod("getIndexOfThisSubtask");
            return (Integer) idx.invoke(info);
        } catch (NoSuchMethodException e) {
            Method idx = RuntimeContext.class.getMethod("getIndexOfThisSubtask");
            return (Integer) idx.invoke(rc);
        }
    }

    // ---------------------------------------------------------------- report

    /** Appends one line per call; each line is written with one write(2) on an O_APPEND file. */
    static final class Report {
        private Report() {}

        static synchronized void write(String path, String line) {
            byte[] b = (line + "\n").getBytes(StandardCharsets.UTF_8);
            if (path == null) {
                System.out.print(line + "\n");
                System.out.flush();
                return;
            }
            try {
                Files.write(
                        Paths.get(path),
                        b,
                        StandardOpenOption.CREATE,
                        StandardOpenOption.WRITE,
                        StandardOpenOption.APPEND);
            } catch (java.io.IOException e) {
                throw new RuntimeException("ckptfs-seqjob: cannot append to report " + path, e);
            }
        }
    }
}
