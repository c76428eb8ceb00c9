package zkbridge

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseServers(t *testing.T) {
	good := []struct {
		connect string
		want    []string
	}{
		{"zk1:2181", []string{"zk1:2181"}},
		{"zk1:2181,zk2:2182", []string{"zk1:2181", "zk2:2182"}},
		{" zk1:2181 ,\tzk2:2182 ", []string{"zk1:2181", "zk2:2182"}},
		{"[::1]:2181, 127.0.0.1:2181", []string{"[::1]:2181", "127.0.0.1:2181"}},
	}
	for _, tc := range good {
		got, err := ParseServers(tc.connect)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseServers(%q) = %q, %v; want %q", tc.connect, got, err, tc.want)
		}
		c := DefaultConfig()
		c.Servers = got
		if err := c.Validate(); err != nil {
			t.Errorf("%q: Validate refuses what ParseServers returns: %v", tc.connect, err)
		}
	}
	bad := []struct{ connect, want string }{
		{"", "no ZooKeeper servers"},
		{"  ", "no ZooKeeper servers"},
		{"zk1:2181,", "server 2 is empty"},
		{"zk1:2181,,zk2:2181", "server 2 is empty"},
		{",zk1:2181", "server 1 is empty"},
		{"zk1", `server "zk1": want HOST:PORT`},
		{":2181", `server ":2181": want HOST:PORT`},
		{"zk1:0", `server "zk1:0": bad port`},
		{"zk1:65536", `server "zk1:65536": bad port`},
		{"zk1:x", `server "zk1:x": bad port`},
		{"zk1:2181/flink", "a chroot suffix is not supported"},
		{"zk 1:2181", `server "zk 1:2181": blank in the host`},
	}
	for _, tc := range bad {
		if _, err := ParseServers(tc.connect); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseServers(%q): %v; want %q", tc.connect, err, tc.want)
		}
	}
	// Validate holds the same rule for servers given directly.
	c := DefaultConfig()
	c.Servers = []string{" zk1:2181"}
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "Servers" || !strings.Contains(err.Error(), "blank in the host") {
		t.Errorf("Validate of a server with a blank: %v", err)
	}
}

// Every problem Validate reports names its field.
func TestValidateNamesTheField(t *testing.T) {
	c := Config{Servers: []string{"zk1"}, PathRoot: "flink", Site: "a/b", ClusterID: "//"}
	err := c.Validate()
	if err == nil {
		t.Fatal("an empty Config is valid")
	}
	fields := map[string]bool{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Errorf("%v is no *FieldError", e)
			continue
		}
		fields[fe.Field] = true
	}
	for _, f := range []string{"Servers", "PathRoot", "Site", "ClusterID", "SessionTimeout", "Logger"} {
		if !fields[f] {
			t.Errorf("no problem with %s in %v", f, err)
		}
	}
}
