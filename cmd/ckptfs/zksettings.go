package main

import (
	"errors"
	"log/slog"
	"time"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// zkSettings locate Flink's HA data in ZooKeeper and name this site: the
// settings of every command that talks to ZooKeeper (mount, status,
// takeover, restore-pruned). bridgeConfig is their one mapping onto
// zkbridge.Config.
type zkSettings struct {
	ZK        string
	Site      string
	ClusterID string
	PathRoot  string
	// FlinkVersion, CheckpointsDirs and FlinkSessionTimeout are settings
	// of the commands that read Flink's pointers, not of mount.
	FlinkVersion        string
	CheckpointsDirs     []string
	FlinkSessionTimeout time.Duration
}

func defaultZKSettings() zkSettings {
	d := zkbridge.DefaultConfig()
	return zkSettings{PathRoot: d.PathRoot, FlinkSessionTimeout: d.FlinkSessionTimeout}
}

// zkFieldSettings names the setting behind each zkbridge.Config field
// that bridgeConfig fills from one.
var zkFieldSettings = map[string]string{
	"Servers":             "zk",
	"Site":                "site",
	"ClusterID":           "cluster-id",
	"PathRoot":            "path-root",
	"FlinkVersion":        "flink-version",
	"CheckpointsDirs":     "checkpoints-dir",
	"FlinkSessionTimeout": "flink-session-timeout",
}

// bridgeConfig maps the settings onto zkbridge's configuration, logging
// to log, and validates it. Each problem names its setting (settingError).
func (s *zkSettings) bridgeConfig(log *slog.Logger) (zkbridge.Config, error) {
	cfg := zkbridge.DefaultConfig()
	var errs []error
	if s.ZK == "" {
		errs = append(errs, missingSetting("zk", "zk is required: --zk, CKPTFS_ZK or zk in the configuration file"))
	} else {
		servers, err := zkbridge.ParseServers(s.ZK)
		for _, e := range leaves(err) {
			errs = append(errs, badSetting("zk", "zk %q: %w", s.ZK, e))
		}
		cfg.Servers = servers
	}
	gen, err := zkbridge.ParseGeneration(s.FlinkVersion)
	if err != nil {
		errs = append(errs, badSetting("flink-version", "flink-version: %w", err))
	}
	cfg.Site, cfg.ClusterID, cfg.PathRoot = s.Site, s.ClusterID, s.PathRoot
	cfg.FlinkVersion, cfg.CheckpointsDirs, cfg.FlinkSessionTimeout = gen, s.CheckpointsDirs, s.FlinkSessionTimeout
	cfg.Logger = log
	for _, e := range leaves(cfg.Validate()) {
		var fe *zkbridge.FieldError
		name := ""
		if errors.As(e, &fe) {
			name = zkFieldSettings[fe.Field]
		}
		switch {
		case name == "zk":
			// ParseServers, which holds Validate's rule, said it.
		case name != "":
			errs = append(errs, badSetting(name, "%s: %w", name, fe.Err))
		default:
			errs = append(errs, e)
		}
	}
	return cfg, errors.Join(errs...)
}

// checkLogFormat is the rule of the setting log-format.
func checkLogFormat(format string) error {
	if format != "text" && format != "json" {
		return badSetting("log-format", "log-format %q: want text or json", format)
	}
	return nil
}

// requireSite is the rule of the commands that write in ZooKeeper.
func requireSite(site string) error {
	if site == "" {
		return missingSetting("site", "site is required: --site, CKPTFS_SITE or site in the configuration file")
	}
	return nil
}
