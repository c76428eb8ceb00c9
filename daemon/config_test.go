package daemon

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

func TestMountMappings(t *testing.T) {
	const backing, mnt = "/nas", "/flink"
	for m, ok := range map[string]bool{
		"file:///flink=/nas":          true,
		"/flink=/nas":                 true,
		"file://localhost/flink=/nas": true,
		"file:///flink/job=/nas/job":  true,
		"file:///=/":                  false, // /flink would be read from /flink
		"file:///flink=/elsewhere":    false,
		"/flink/job=/elsewhere":       false,
		"file:///flink/job=/nas":      false,
		"hdfs://nn/flink=/elsewhere":  true, // Flink reads HDFS, not the mount
		"file:///other=/elsewhere":    true,
		"file:///fl=/elsewhere":       true, // a sibling, not a parent
	} {
		mp, err := manifest.ParseMapping(m)
		if err != nil {
			t.Fatal(err)
		}
		res, err := manifest.NewResolver([]manifest.Mapping{mp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = checkMountMappings(res, backing, mnt)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", m, err, ok)
		}
	}
}

func TestValidateNamesFields(t *testing.T) {
	res, err := manifest.NewResolver(nil, []string{"/nas"})
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Backing, c.MountPoint, c.Resolver, c.Logger = "/nas", "/nas/flink", res, slog.New(slog.DiscardHandler)
	c.MetricsAddr, c.LagInterval, c.FollowInterval = "9477", 0, 0
	c.Notify.Detach = true
	fields := map[string]bool{}
	for _, e := range unjoin(c.Validate()) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Errorf("not a FieldError: %v", e)
			continue
		}
		fields[fe.Field] = true
	}
	for _, f := range []string{"MountPoint", "MetricsAddr", "LagInterval", "FollowInterval", "Notify.Detach"} {
		if !fields[f] {
			t.Errorf("no error for %s (got %v)", f, fields)
		}
	}
	c = DefaultConfig()
	c.Backing, c.MountPoint, c.Resolver, c.Logger = "/nas", "/flink", res, slog.New(slog.DiscardHandler)
	if err := c.Validate(); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
	// The automatic takeover's settings.
	bad := c
	bad.Takeover, bad.HoldTimeout, bad.SiteJobManagers = TakeoverAuto, 0, []string{"jm 1"}
	fields = map[string]bool{}
	for _, e := range unjoin(bad.Validate()) {
		var fe *FieldError
		if errors.As(e, &fe) {
			fields[fe.Field] = true
		}
	}
	for _, f := range []string{"ZooKeeper", "HoldTimeout", "SiteJobManagers"} {
		if !fields[f] {
			t.Errorf("takeover auto: no error for %s (got %v)", f, fields)
		}
	}
	bad = c
	bad.Takeover = "sometimes"
	if err := bad.Validate(); err == nil {
		t.Error("takeover \"sometimes\" validates")
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// TestValidateWatchdog: with ZooKeeper the daemon needs a watchdog, the
// fence of a daemon that does not run (design §5.14).
func TestValidateWatchdog(t *testing.T) {
	res, err := manifest.NewResolver(nil, []string{"/nas"})
	if err != nil {
		t.Fatal(err)
	}
	z := zkbridge.DefaultConfig()
	z.Servers, z.ClusterID = []string{"127.0.0.1:2181"}, "c"
	c := DefaultConfig()
	c.Backing, c.MountPoint, c.Resolver, c.Logger = "/nas", "/flink", res, slog.New(slog.DiscardHandler)
	c.ZooKeeper, c.Site = &z, "dc1"
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "Watchdog" {
		t.Errorf("ZooKeeper without a watchdog: %v, want an error for Watchdog", err)
	}
	c.Watchdog = &watchdog.Recorder{}
	if err := c.Validate(); err != nil {
		t.Errorf("ZooKeeper with a watchdog: %v", err)
	}
}
