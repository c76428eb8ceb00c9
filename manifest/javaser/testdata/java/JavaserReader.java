import java.io.*;
import java.net.URI;
import java.util.*;
import org.apache.flink.runtime.state.RetrievableStreamStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;

/**
 * Reads streams written by the Go encoder with ObjectInputStream and prints what it read,
 * one "case: value" line per item. Arguments are case=path pairs.
 */
public class JavaserReader {
    static String name;

    static void print(Object line) {
        System.out.println(name + ": " + line);
    }

    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int eq = arg.indexOf('=');
            name = arg.substring(0, eq);
            try (ObjectInputStream in = new ObjectInputStream(new FileInputStream(arg.substring(eq + 1)))) {
                read(in);
                try {
                    Object extra = in.readObject();
                    print("EXTRA object " + extra);
                } catch (EOFException e) {
                    print("end");
                } catch (OptionalDataException e) {
                    print("EXTRA data");
                }
            }
        }
    }

    static void read(ObjectInputStream in) throws Exception {
        switch (name) {
            case "flinkznode": {
                RetrievableStreamStateHandle<?> h = (RetrievableStreamStateHandle<?>) in.readObject();
                FileStateHandle f = (FileStateHandle) h.getWrappedStreamStateHandle();
                print("stateSize=" + f.getStateSize() + " uri=" + f.getFilePath().toUri());
                break;
            }
            case "uuid":
                print(in.readObject());
                break;
            case "leaderinfo":
                print(in.readUTF());
                print(in.readObject());
                break;
            case "enum": {
                Object a = in.readObject(), b = in.readObject(), c = in.readObject();
                print(a + " " + b + " " + c + " red=" + (a == Color.RED) + " green=" + (b == Color.GREEN) + " same=" + (a == c));
                break;
            }
            case "strings": {
                Object[] s = new Object[8];
                for (int i = 0; i < s.length; i++) {
                    s[i] = in.readObject();
                    print(Types.esc((String) s[i]));
                }
                print("same=" + (s[0] == s[6]) + " distinct=" + (s[0] != s[7]));
                String big = (String) in.readObject();
                print("long length=" + big.length() + " hash=" + big.hashCode());
                break;
            }
            case "arrays":
                print(Arrays.toString((int[]) in.readObject()));
                print(Arrays.toString((long[]) in.readObject()));
                print(Arrays.toString((double[]) in.readObject()));
                print(Arrays.toString((byte[]) in.readObject()));
                print(Arrays.deepToString((Object[]) in.readObject()));
                break;
            case "jdkbuilt": {
                print(in.readObject());
                print(((URI) in.readObject()).getPath());
                List<?> list = (List<?>) in.readObject();
                print(list.get(0) + " " + list.get(1) + " " + Arrays.toString((byte[]) list.get(2)));
                print(new TreeMap<>((Map<?, ?>) in.readObject()));
                print(new TreeMap<>((Map<?, ?>) in.readObject()));
                print(((Map<?, ?>) in.readObject()).isEmpty());
                print(in.readObject() == Color.BLUE);
                break;
            }
            case "custom": {
                Custom c = (Custom) in.readObject();
                print(c.a + " " + c.s + " " + c.extra);
                break;
            }
            case "hierarchy":
                print(((Derived) in.readObject()).describe());
                break;
            case "externalizable": {
                Ext e = (Ext) in.readObject();
                print(e.n + " " + e.s + " " + e.u + " " + e.b);
                break;
            }
            case "backrefs": {
                List<?> list = (List<?>) in.readObject();
                Node a = (Node) list.get(0), b = (Node) list.get(1);
                print(a.label + " " + b.label + " a.next==b " + (a.next == b) + " b.next==a " + (b.next == a)
                    + " a.self==a " + (a.self == a) + " list[2]==a " + (list.get(2) == a) + " b.self " + b.self);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown case " + name);
        }
    }
}
