import java.io.*;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.nio.file.Files;
import java.util.*;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.RetrievableStreamStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;

/** Writes one stream per case into the directory args[0], as <case>.ser. */
public class JavaserWriter {
    interface Case {
        void write(ObjectOutputStream out) throws Exception;
    }

    static final Map<String, Case> cases = new LinkedHashMap<>();

    static void add(String name, Case c) {
        cases.put(name, c);
    }

    static String repeat(String s, int n) {
        return s.repeat(n);
    }

    public static void main(String[] args) throws Exception {
        add("strings", out -> {
            String hello = "hello";
            out.writeObject(hello);
            out.writeObject("");
            out.writeObject("nul\0byte");
            out.writeObject("BMP \u00e9 \u00df \u20ac \u4e2d");
            out.writeObject("non-BMP \uD834\uDD1E \uD83D\uDE00");
            out.writeObject("lone x\uD800y\uDC00z");
            out.writeObject(hello); // same object: back reference
            out.writeObject(new String("hello")); // equal, not identical: new handle
        });
        add("longstring", out -> {
            out.writeObject(repeat("a", 65535)); // largest TC_STRING
            out.writeObject(repeat("a", 65536)); // smallest TC_LONGSTRING
            out.writeObject(repeat("\u00e9\uD83D\uDE00\0", 10000)); // 90000 bytes of modified UTF-8
        });
        add("uuid", out -> out.writeObject(new UUID(0x0123456789abcdefL, 0xfedcba9876543210L)));
        add("arraylist", out -> {
            ArrayList<Object> inner = new ArrayList<>(List.of("b"));
            out.writeObject(new ArrayList<>(Arrays.asList("a", 7, null, 1L << 40, inner)));
        });
        add("hashmap", out -> {
            HashMap<String, Integer> m = new HashMap<>();
            m.put("one", 1);
            m.put("two", 2);
            m.put("three", 3);
            out.writeObject(m);
        });
        add("enum", out -> {
            out.writeObject(Color.RED);
            out.writeObject(Color.GREEN);
            out.writeObject(Color.RED);
        });
        add("primarrays", out -> {
            out.writeObject(new int[] {1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE});
            out.writeObject(new long[] {0, -2, Long.MAX_VALUE});
            byte[] bytes = new byte[300];
            for (int i = 0; i < bytes.length; i++) bytes[i] = (byte) i;
            out.writeObject(bytes);
            out.writeObject(new boolean[] {true, false, true});
            out.writeObject(new char[] {'a', '\u00e9', '\uffff', '\0'});
            out.writeObject(new short[] {-32768, 32767});
            out.writeObject(new float[] {1.5f, Float.NaN, -0.0f, Float.intBitsToFloat(0x7fc00001)});
            out.writeObject(new double[] {2.25, Double.NEGATIVE_INFINITY, Double.longBitsToDouble(0x7ff0000000000001L)});
            out.writeObject(new int[0]);
        });
        add("objarrays", out -> {
            String x = "x";
            out.writeObject(new String[] {x, null, x});
            out.writeObject(new Object[] {1, "s", new int[] {1}, null});
            out.writeObject(new int[][] {{1, 2}, {3}});
            out.writeObject(new String[0]);
        });
        add("nested", out -> out.writeObject(new Outer("outer", new Inner(42, "in"))));
        add("hierarchy", out -> out.writeObject(new Derived()));
        add("custom", out -> out.writeObject(new Custom(1, "f")));
        add("externalizable", out -> out.writeObject(new Ext(5, "ext", new UUID(1, 2), true)));
        add("backrefs", out -> {
            Node a = new Node("a");
            Node b = new Node("b");
            a.next = b;
            b.next = a;
            a.self = a;
            out.writeObject(new ArrayList<>(Arrays.asList(a, b, a)));
        });
        add("reset", out -> {
            out.writeInt(7);
            out.writeUTF("top");
            String shared = "shared";
            out.writeObject(shared);
            out.writeObject(shared);
            out.reset();
            out.writeObject(shared);
            out.writeObject(new UUID(3, 4));
        });
        add("proxy", out -> out.writeObject(Proxy.newProxyInstance(
            JavaserWriter.class.getClassLoader(), new Class<?>[] {Greeter.class}, new GreeterHandler("hi"))));
        add("classobj", out -> {
            out.writeObject(String.class);
            out.writeObject(Color.class);
            out.writeObject(int[].class);
            out.writeObject(ObjectStreamClass.lookup(UUID.class));
        });
        add("flinkznode", out -> out.writeObject(flinkZnode()));
        add("leaderinfo", out -> {
            out.writeUTF("pekko.tcp://flink@jobmanager-0.flink:6123/user/rpc/dispatcher_1");
            out.writeObject(new UUID(0x1111222233334444L, 0x5555666677778888L));
        });
        add("jdkbuilt", out -> {
            out.writeObject(new UUID(-1L, 42L));
            out.writeObject(new URI("hdfs://nn:8020/flink/ha/my%20job/completedCheckpoint0a1b2c3d4e5f"));
            out.writeObject(new ArrayList<>(Arrays.asList(7, 1L << 40, new byte[] {1, 2, 3})));
            HashMap<Integer, String> small = new HashMap<>();
            small.put(1, "one");
            out.writeObject(small);
            HashMap<Integer, String> grown = new HashMap<>();
            for (int i = 0; i < 13; i++) grown.put(i, "v" + i);
            out.writeObject(grown);
            out.writeObject(new HashMap<String, String>());
            out.writeObject(Color.BLUE);
        });

        File dir = new File(args[0]);
        for (Map.Entry<String, Case> e : cases.entrySet()) {
            ByteArrayOutputStream bos = new ByteArrayOutputStream();
            try (ObjectOutputStream out = new ObjectOutputStream(bos)) {
                e.getValue().write(out);
            }
            Files.write(new File(dir, e.getKey() + ".ser").toPath(), bos.toByteArray());
        }
        for (boolean self : new boolean[] {false, true}) {
            ByteArrayOutputStream bos = new ByteArrayOutputStream();
            try (ObjectOutputStream out = new AnnotatingOutputStream(bos, self)) {
                out.writeObject(new Outer("annotated", new Inner(1, "i")));
                out.writeObject(7); // an Integer: its class annotation holds an object
            }
            String name = self ? "selfannotation" : "classannotation";
            Files.write(new File(dir, name + ".ser").toPath(), bos.toByteArray());
        }
    }

    static RetrievableStreamStateHandle<?> flinkZnode() throws Exception {
        URI uri = new URI("hdfs://namenode:8020/flink/ha/application_1700000000000_0001/completedCheckpoint9f1e2d3c4b5a");
        return new RetrievableStreamStateHandle<>(new FileStateHandle(new Path(uri), 4242L));
    }
}
