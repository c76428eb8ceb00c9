import java.io.*;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.UUID;

/** Classes serialized by JavaserWriter and read by JavaserReader. */
public class Types {
    /** Escapes everything but printable ASCII, so output does not depend on the platform charset. */
    static String esc(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c >= 0x20 && c < 0x7f && c != '\\') {
                b.append(c);
            } else {
                b.append(String.format("\\u%04x", (int) c));
            }
        }
        return b.toString();
    }
}

enum Color { RED, GREEN, BLUE }

class Inner implements Serializable {
    private static final long serialVersionUID = 14L;
    int v;
    String s;
    Inner(int v, String s) { this.v = v; this.s = s; }
}

class Outer implements Serializable {
    private static final long serialVersionUID = 15L;
    String name;
    Inner inner;
    Outer(String name, Inner inner) { this.name = name; this.inner = inner; }
}

/** Not serializable: its field is not written, and it needs a no-arg constructor. */
class Root {
    int notSerialized = 99;
    Root() {}
}

class Base extends Root implements Serializable {
    private static final long serialVersionUID = 11L;
    int x = 1;
    String name = "base";
    long onlyBase = 5;
}

class Derived extends Base {
    private static final long serialVersionUID = 12L;
    int x = 2;
    String name = "derived";
    double onlyDerived = 2.5;
    String describe() {
        return "Base.x=" + ((Base) this).x + " Base.name=" + ((Base) this).name + " onlyBase=" + onlyBase
            + " Derived.x=" + x + " Derived.name=" + name + " onlyDerived=" + onlyDerived;
    }
}

class Custom implements Serializable {
    private static final long serialVersionUID = 7L;
    int a;
    String s;
    transient String extra;

    Custom(int a, String s) { this.a = a; this.s = s; }

    private void writeObject(ObjectOutputStream out) throws IOException {
        out.defaultWriteObject();
        out.writeInt(42);
        out.writeUTF("extra \u00e9\uD834\uDD1E");
        out.writeObject(new int[] {7, 8});
        out.writeLong(-1L);
        out.write(pattern(2000));
        out.writeObject("after");
    }

    private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
        in.defaultReadObject();
        int i = in.readInt();
        String u = in.readUTF();
        int[] arr = (int[]) in.readObject();
        long l = in.readLong();
        byte[] big = new byte[2000];
        in.readFully(big);
        Object after = in.readObject();
        extra = i + " " + Types.esc(u) + " " + Arrays.toString(arr) + " " + l
            + " big=" + Arrays.equals(big, pattern(2000)) + " " + after;
    }

    static byte[] pattern(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) b[i] = (byte) (i * 7);
        return b;
    }
}

class Ext implements Externalizable {
    private static final long serialVersionUID = 9L;
    int n;
    String s;
    UUID u;
    boolean b;

    public Ext() {}

    Ext(int n, String s, UUID u, boolean b) { this.n = n; this.s = s; this.u = u; this.b = b; }

    public void writeExternal(ObjectOutput out) throws IOException {
        out.writeInt(n);
        out.writeUTF(s);
        out.writeObject(u);
        out.writeBoolean(b);
    }

    public void readExternal(ObjectInput in) throws IOException, ClassNotFoundException {
        n = in.readInt();
        s = in.readUTF();
        u = (UUID) in.readObject();
        b = in.readBoolean();
    }
}

class Node implements Serializable {
    private static final long serialVersionUID = 13L;
    String label;
    Node next;
    Node self;
    Node(String label) { this.label = label; }
}

interface Greeter { String greet(); }

class GreeterHandler implements InvocationHandler, Serializable {
    private static final long serialVersionUID = 16L;
    String msg;
    GreeterHandler(String msg) { this.msg = msg; }
    public Object invoke(Object proxy, Method m, Object[] args) { return msg; }
}

/**
 * Writes a class annotation for every class, as RMI's stream does with codebases. With
 * selfReference, the annotation of Integer holds an Integer, which refers to the descriptor
 * being written: the JDK writes such a stream but cannot read it back.
 */
class AnnotatingOutputStream extends ObjectOutputStream {
    private final boolean selfReference;

    AnnotatingOutputStream(OutputStream out, boolean selfReference) throws IOException {
        super(out);
        this.selfReference = selfReference;
    }

    @Override
    protected void annotateClass(Class<?> cl) throws IOException {
        writeUTF("ann:" + cl.getName());
        writeObject(selfReference ? (Object) Integer.valueOf(cl.getName().length()) : cl.getSimpleName());
    }
}
