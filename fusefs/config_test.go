package fusefs

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Backing, c.MountPoint, c.Visibility = "/srv/nas", "/flink", AllVisible{}
		return c
	}
	if c := valid(); c.Validate() != nil {
		t.Fatalf("valid config rejected: %v", c.Validate())
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"relative backing", func(c *Config) { c.Backing = "nas" }, "backing"},
		{"relative mount point", func(c *Config) { c.MountPoint = "flink" }, "mount point"},
		{"mount point inside backing", func(c *Config) { c.MountPoint = "/srv/nas/flink" }, "overlap"},
		{"backing inside mount point", func(c *Config) { c.Backing = "/flink/nas" }, "overlap"},
		{"same directory", func(c *Config) { c.MountPoint = "/srv/nas/" }, "overlap"},
		{"no mode", func(c *Config) { c.Mode = 0 }, "mode"},
		{"bad mode", func(c *Config) { c.Mode = 9 }, "mode"},
		{"no visibility", func(c *Config) { c.Visibility = nil }, "Visibility"},
		{"no logger", func(c *Config) { c.Logger = nil }, "Logger"},
		{"no clock", func(c *Config) { c.Now = nil }, "clock"},
		{"negative entry timeout", func(c *Config) { c.EntryTimeout = -time.Second }, "entry timeout"},
		{"negative attr timeout", func(c *Config) { c.AttrTimeout = -1 }, "attribute timeout"},
		{"negative negative timeout", func(c *Config) { c.NegativeTimeout = -1 }, "negative timeout"},
		{"negative fence timeout", func(c *Config) { c.FenceTimeout = -1 }, "fence timeout"},
		{"no probe timeout", func(c *Config) { c.ProbeTimeout = 0 }, "probe timeout"},
		{"huge MaxWrite", func(c *Config) { c.MaxWrite = 2 << 20 }, "MaxWrite"},
		{"tiny MaxWrite", func(c *Config) { c.MaxWrite = 512 }, "MaxWrite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if c.NegativeTimeout != 0 || c.EntryTimeout != time.Second || c.AttrTimeout != time.Second {
		t.Errorf("timeouts: entry %v attr %v negative %v", c.EntryTimeout, c.AttrTimeout, c.NegativeTimeout)
	}
	if !c.AllowOther || !c.DefaultPermissions || !c.Passthrough || c.MaxWrite != 1<<20 || c.Mode != ModeReplica {
		t.Errorf("daemon defaults wrong: %+v", c)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{ModeReplica, ModePrimary, ModeFenced} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("readonly"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}
