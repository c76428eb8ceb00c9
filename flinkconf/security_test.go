package flinkconf

import (
	"reflect"
	"strings"
	"testing"
)

// What Flink 1.20.5's Configuration makes of
// high-availability.zookeeper.client.authorization values (run against
// flink-dist-1.20.5.jar).
func TestParseMapAsFlink(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string // nil: Flink refuses it
	}{
		{"digest:'flink:secret'", map[string]string{"digest": "flink:secret"}},
		{"digest:flink", map[string]string{"digest": "flink"}},
		{"digest:'flink:secret',ip:'1.2.3.4'", map[string]string{"digest": "flink:secret", "ip": "1.2.3.4"}},
		{" digest : 'a''b:c' ", map[string]string{"digest": "a'b:c"}},
		{`digest:"x:y"`, map[string]string{"digest": "x:y"}},
		{"'digest:''u:p'''", map[string]string{"digest": "u:p"}},
		{"digest:'flink:secret'\t,sasl:x", map[string]string{"digest": "flink:secret", "sasl": "x"}},
		{"digest:'u:p' x", nil},
		{"digest:'u:p", nil},
		{"a:b,,c:d", nil},
		{"'digest':'flink:secret'", nil},
		{"digest:flink:secret", nil},
	} {
		got, err := parseMap(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("parseMap(%q) = %v, Flink refuses it", tc.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseMap(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestZooKeeperSecurity(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		format     Format
		want       ZooKeeperSecurity
		source     string // of the authorization
	}{
		{"config.yaml nested", `
high-availability:
  zookeeper:
    client:
      acl: Creator
      authorization:
        digest: "flink:secret"
env:
  java:
    opts:
      jobmanager: -Xmx1g -Djava.security.auth.login.config=/etc/flink/jaas.conf
`, Standard, ZooKeeperSecurity{ACL: "creator", Authorization: map[string]string{"digest": "flink:secret"}, LoginContext: "Client", JAASFile: "/etc/flink/jaas.conf"},
			"high-availability.zookeeper.client.authorization.digest (line 7)"},
		{"flink-conf.yaml flat", `high-availability.zookeeper.client.acl: creator
high-availability.zookeeper.client.authorization: digest:'flink:secret'
security.kerberos.login.contexts: KafkaClient,Client
`, Legacy, ZooKeeperSecurity{ACL: "creator", Authorization: map[string]string{"digest": "flink:secret"}, LoginContext: "Client", Kerberos: true},
			"high-availability.zookeeper.client.authorization (line 2)"},
		{"defaults", `high-availability.type: zookeeper
`, Legacy, ZooKeeperSecurity{ACL: "open", LoginContext: "Client"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("f", []byte(tc.file), tc.format)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.ZooKeeperSecurity()
			if err != nil {
				t.Fatal(err)
			}
			src := s.Sources[ZooKeeperAuthorization.Key].String()
			s.Sources = nil
			if !reflect.DeepEqual(*s, tc.want) {
				t.Errorf("got %+v, want %+v", *s, tc.want)
			}
			if tc.source != "" && src != tc.source {
				t.Errorf("authorization from %q, want %q", src, tc.source)
			}
		})
	}
	for _, tc := range []struct{ file, want string }{
		{"high-availability.zookeeper.client.acl: closed\n", "Flink accepts open or creator"},
		{"high-availability.zookeeper.client.acl: creator\nzookeeper.sasl.disable: true\n", "Flink refuses to start so"},
		{"high-availability.zookeeper.client.authorization: digest:flink:secret\n", "quote a value with colons"},
	} {
		c, err := Parse("f", []byte(tc.file), Legacy)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ZooKeeperSecurity(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
}

func FuzzParseMap(f *testing.F) {
	for _, s := range []string{"digest:'flink:secret'", " digest : 'a''b:c' ", "'digest:''u:p'''", "digest:'u:p' x", "a:b,,c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseMap(s)
		if err == nil && m == nil {
			t.Fatalf("parseMap(%q): no map and no error", s)
		}
	})
}
