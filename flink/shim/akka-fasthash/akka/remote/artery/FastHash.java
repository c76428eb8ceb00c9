package akka.remote.artery;

/** The static forwarder Scala writes beside an object: see FastHash$. */
public final class FastHash {
    private FastHash() {}

    public static int ofString(String s) {
        return FastHash$.MODULE$.ofString(s);
    }
}
