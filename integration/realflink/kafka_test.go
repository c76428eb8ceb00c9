package realflink

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kafkaRelease is the broker's jar set in flink/jars.tsv.
const kafkaRelease = "kafka-4.1.1"

// Kafka is a real Apache Kafka broker: Kafka's own server jars from
// Maven Central (flink/jars.tsv), in KRaft mode, one process as broker
// and controller, with the replication factors of internal topics at 1
// so that transactions work on one node. It runs in the tie-breaker site,
// which survives DC1's loss, as a stretched Kafka cluster's quorum would.
type Kafka struct {
	// Bootstrap is the broker's address for clients.
	Bootstrap string
	lib       string
	// logConf logs to standard error: the console consumer's records
	// are its standard output.
	logConf string
	proc    *Process
}

// StartKafka formats a KRaft log in dir and starts the broker in site s,
// returning once it accepts connections.
func StartKafka(t testing.TB, s *Site, dir string) *Kafka {
	t.Helper()
	lib := JarSet(t, kafkaRelease)
	ports := freePorts(t, siteAddr, 2)
	k := &Kafka{Bootstrap: fmt.Sprintf("%s:%d", siteAddr, ports[0]), lib: lib}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "server.properties")
	conf := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=1",
		fmt.Sprintf("controller.quorum.voters=1@%s:%d", siteAddr, ports[1]),
		fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s:%d", k.Bootstrap, siteAddr, ports[1]),
		"advertised.listeners=PLAINTEXT://" + k.Bootstrap,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"",
	}, "\n")
	logConf := filepath.Join(dir, "log4j2.properties")
	k.logConf = logConf
	logs := strings.Join([]string{
		"appender.out.type=Console",
		"appender.out.name=out",
		"appender.out.target=SYSTEM_ERR",
		"appender.out.layout.type=PatternLayout",
		"appender.out.layout.pattern=[%d] %p %m (%c)%n",
		"rootLogger.level=WARN",
		"rootLogger.appenderRef.out.ref=out",
		"logger.server.name=kafka.server.KafkaRaftServer",
		"logger.server.level=INFO",
		"logger.txn.name=org.apache.kafka.coordinator.transaction",
		"logger.txn.level=INFO",
		"",
	}, "\n")
	for p, c := range map[string]string{props: conf, logConf: logs} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A cluster id is 16 random bytes in URL-safe base64; like Kafka's
	// Uuid.randomUuid, not one that starts with "-", which the
	// formatter's argument parser would take for an option (chaos-eo
	// seed 3301, run 29).
	var clusterID string
	for clusterID == "" || clusterID[0] == '-' {
		id := make([]byte, 16)
		rand.Read(id)
		clusterID = base64.RawURLEncoding.EncodeToString(id)
	}
	java := []string{"java", "-Xms128m", "-Xmx512m", "-Dlog4j2.configurationFile=" + logConf, "-cp", filepath.Join(lib, "*")}
	format := exec.Command(java[0], append(java[1:], "kafka.tools.StorageTool", "format",
		"-t", clusterID, "-c", props)...)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("kafka: formatting the KRaft log: %v\n%s", err, out)
	}
	var err error
	k.proc, err = s.Start("kafka", s.Command(append(java, "kafka.Kafka", props)...), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, stepTimeout, "the Kafka broker to start", func() bool {
		return k.proc.Count("Kafka Server started") > 0
	}, k.proc)
	c, err := net.DialTimeout("tcp", k.Bootstrap, 5*time.Second)
	if err != nil {
		t.Fatalf("kafka: started, yet %s refuses: %v", k.Bootstrap, err)
	}
	c.Close()
	return k
}

// ReadCommitted reads topic (one partition) from its start with Kafka's
// console consumer in read_committed isolation, as a downstream consumer
// of an exactly-once job does, until nothing new arrives for idle. It
// returns the values in offset order. The partition is assigned, not
// joined through a consumer group: the first fetch does not wait for a
// group's rebalance, so a short idle cannot end the read before it.
func (k *Kafka) ReadCommitted(ctx context.Context, topic string, idle time.Duration) ([]string, error) {
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+k.logConf, "-cp", filepath.Join(k.lib, "*"),
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", k.Bootstrap, "--topic", topic, "--partition", "0", "--offset", "earliest",
		"--isolation-level", "read_committed", "--timeout-ms", fmt.Sprint(idle.Milliseconds()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && !strings.Contains(stderr.String(), "Processed a total of") {
		return nil, fmt.Errorf("console consumer: %w\n%s", err, tail(stderr.String(), 20))
	}
	var vals []string
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimRight(line, "\n"); line != "" {
			vals = append(vals, line)
		}
	}
	return vals, nil
}
