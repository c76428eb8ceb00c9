package ckptfs.seqjob;

import java.util.TreeSet;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;

/**
 * ConfDump of ../src for Flink 1.4 to 1.13. Prints the configuration Flink's own loader reads
 * from each configuration directory given, so that ckptfs's reader of Flink's configuration
 * files can be held against it.
 *
 * <p>For each directory, each line prefixed with "@confdump ": a line "dir DIR", then one line "key\tvalue" per key, sorted, with the
 * value as Configuration#getString reads it (the API before typed options), then "end"; or
 * "error\tMESSAGE" when Flink refuses the directory. Backslashes, tabs and line breaks in keys
 * and values are escaped as \\, \t, \n and \r.
 */
public final class ConfDump {

    // Marks the lines of the dump among those Flink's logging prints to standard output.
    private static final String PREFIX = "@confdump ";

    private ConfDump() {}

    public static void main(String[] args) {
        for (String dir : args) {
            System.out.println(PREFIX + "dir " + dir);
            Configuration conf;
            try {
                conf = GlobalConfiguration.loadConfiguration(dir);
            } catch (RuntimeException e) {
                StringBuilder msg = new StringBuilder(String.valueOf(e.getMessage()));
                for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                    msg.append(": ").append(c.getMessage());
                }
                System.out.println(PREFIX + "error\t" + escape(msg.toString()));
                continue;
            }
            for (String key : new TreeSet<>(conf.keySet())) {
                String value;
                try {
                    value = conf.getString(key, null);
                } catch (RuntimeException e) {
                    value = "<error: " + e.getMessage() + ">";
                }
                System.out.println(PREFIX + escape(key) + "\t" + escape(value));
            }
            System.out.println(PREFIX + "end");
        }
        System.out.flush();
    }

    private static String escape(String s) {
        if (s == null) {
            return "<null>";
        }
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
    }
}
