package akka.remote.artery;

/**
 * Stands in for Akka 2.4's {@code FastHash} (Scala object, module class),
 * which Flink 1.4 runs. Akka's reads a String's private {@code value} field
 * through Unsafe as a {@code char[]}; since Java 9 that field is a
 * {@code byte[]}, so every call throws ClassCastException ([B cannot be
 * cast to [C) and the remote actor-ref cache, and with it Flink 1.4's web
 * monitor and job submission, fails on Java 11. This one hashes the
 * String's characters through its public API. It is used only to place
 * keys in Akka's bounded LRU cache: any well-mixed hash is correct.
 */
public final class FastHash$ {
    public static final FastHash$ MODULE$ = new FastHash$();

    private FastHash$() {}

    public int ofString(String s) {
        long h = 0x9E3779B97F4A7C15L ^ s.length();
        for (int i = 0; i < s.length(); i++) {
            h = (h ^ s.charAt(i)) * 0xFF51AFD7ED558CCDL;
            h ^= h >>> 29;
        }
        h ^= h >>> 32;
        return (int) h;
    }
}
