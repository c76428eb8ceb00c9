package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/ckptfs/ckptfs/flinkconf"
)

func newConfigCmd(checks settingsChecks) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Derive a configuration from Flink's, or check one",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newFromFlinkCmd(), newConfigCheckCmd(checks))
	return cmd
}

func newFromFlinkCmd() *cobra.Command {
	var (
		format, out, backing, site, authFile string
	)
	cmd := &cobra.Command{
		Use:   "from-flink [--backing DIR] [--site NAME] [-o yaml|json] PATH",
		Short: "Print a ckptfs configuration derived from Flink's configuration",
		Long: `From-flink reads Flink's configuration as Flink reads it and prints the
ckptfs settings it implies. PATH is flink-conf.yaml (the flat format of
Flink up to 1.19: old and new key names), config.yaml (Flink 1.19 and 2.x:
standard YAML, nested or dotted keys), or Flink's conf directory, read
as Flink looks it up: Flink 1.x reads flink-conf.yaml if present, else
config.yaml; 2.x reads config.yaml only. A directory holding both is read
as the Flink distribution beside it (../lib) would read it, and refused
when there is none; then give the file.

It derives:
  zk                     high-availability.zookeeper.quorum (port 2181 added where missing)
  path-root              high-availability.zookeeper.path.root (Flink's default /flink)
  cluster-id             high-availability.cluster-id (Flink's default /default)
  flink-session-timeout  high-availability.zookeeper.client.session-timeout (60s)
  checkpoints-dir        execution.checkpointing.dir (state.checkpoints.dir)
  mountpoint             the local directory holding the checkpoint directory and
                         high-availability.storageDir (file: URIs only)
  map                    that directory's URI, mapped to --backing
  flink-zk-acl           high-availability.zookeeper.client.acl, when creator
  zk-auth-file           with --auth-file, when Flink authenticates by digest
                         (high-availability.zookeeper.client.authorization, 1.20+)
and each value's comment names the Flink key and line it came from, or says
it is Flink's default. Deprecated keys are read in Flink's order. Flink's
high availability must be ZooKeeper's.

--backing is where this site mounts the NAS (or its replica); --site is
this site's name. Without them the output says what to add.

--auth-file FILE writes Flink's digest identity (user:password of
high-availability.zookeeper.client.authorization) into FILE, mode 0600,
and names it as zk-auth-file, so that ckptfs acts as Flink's identity on
znodes Flink made with client.acl creator. The password is never printed.
A Flink that authenticates by Kerberos or a JAAS file gets a note on what
ckptfs needs instead.

It warns (on stderr) when Flink's settings let it delete what ckptfs
keeps for a failover: a checkpoint retention other than
RETAIN_ON_CANCELLATION, or a restart strategy that ends in FAILED after
bounded failures (each warning names the Flink key to set).

Exit status:
  0  configuration printed (warnings about lines Flink skips, and about
     retention and restart strategy, on stderr)
  3  unreadable file, not a Flink configuration, high availability not
     ZooKeeper's, or a value missing or malformed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fm, err := flinkconf.ParseFormat(format)
			if err != nil {
				return fail("%v", err)
			}
			if out != "yaml" && out != "json" {
				return fail("output format %q: want yaml or json", out)
			}
			if backing != "" && !filepath.IsAbs(backing) {
				return fail("--backing %q must be an absolute path", backing)
			}
			if site != "" && (strings.Contains(site, "/") || site == "." || site == "..") {
				return fail("--site %q is not a site name", site)
			}
			fc, err := flinkconf.Load(args[0], fm)
			if err != nil {
				return fail("%v", err)
			}
			for _, w := range append(fc.Warnings, fc.RecoveryWarnings()...) {
				fmt.Fprintln(cmd.ErrOrStderr(), "ckptfs: warning:", w)
			}
			ha, err := fc.ZooKeeperHA()
			if err != nil {
				return fail("%v", err)
			}
			sec, err := fc.ZooKeeperSecurity()
			if err != nil {
				return fail("%v", err)
			}
			d, err := deriveConfig(ha, backing, site)
			if err != nil {
				return fail("%s: %v", fc.Path, err)
			}
			if err := d.deriveSecurity(sec, authFile); err != nil {
				return fail("%s: %v", fc.Path, err)
			}
			if out == "json" {
				return writeJSON(cmd.OutOrStdout(), d.values())
			}
			if err := d.writeYAML(cmd.OutOrStdout(), fc); err != nil {
				return fail("%v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&backing, "backing", "", "`DIR` where this site mounts the NAS or its replica")
	cmd.Flags().StringVar(&site, "site", "", "this site's `NAME` (dc1, dc2, ...)")
	cmd.Flags().StringVar(&authFile, "auth-file", "", "write Flink's digest credentials into `FILE` (mode 0600) and name it as zk-auth-file")
	cmd.Flags().StringVar(&format, "format", "auto", "`FORMAT` of PATH: auto (by name), flink-conf or config")
	cmd.Flags().StringVarP(&out, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

// derivedSetting is one setting of a derived configuration and why it has
// its value.
type derivedSetting struct {
	key   string
	value any // string or []string
	why   string
}

type derivedConfig struct {
	settings []derivedSetting
	// todo are comments on what the operator still has to add.
	todo []string
	// notes are comments on what the configuration cannot do.
	notes []string
}

func (d *derivedConfig) add(key string, value any, why string) {
	d.settings = append(d.settings, derivedSetting{key, value, why})
}

func (d *derivedConfig) values() map[string]any {
	m := map[string]any{}
	for _, s := range d.settings {
		m[s.key] = s.value
	}
	return m
}

// deriveConfig maps Flink's settings onto ckptfs's.
func deriveConfig(ha *flinkconf.ZooKeeperHA, backing, site string) (*derivedConfig, error) {
	src := func(o flinkconf.Option) string { return ha.Sources[o.Key].String() }
	d := &derivedConfig{}
	if site != "" {
		d.add("site", site, "--site")
	} else {
		d.todo = append(d.todo, "site: this site's name (dc1, dc2, ...): add it here, or give --site, CKPTFS_SITE or the mount option site=")
	}
	d.add("zk", strings.Join(ha.Quorum, ","), src(flinkconf.ZooKeeperQuorum))
	d.add("path-root", ha.PathRoot, src(flinkconf.ZooKeeperRoot))
	why := src(flinkconf.HAClusterID)
	if ha.Sources[flinkconf.HAClusterID.Key].Default() {
		why += "; on YARN and Kubernetes Flink uses the application id instead"
	}
	d.add("cluster-id", ha.ClusterID, why)
	d.add("flink-session-timeout", ha.SessionTimeout.String(), src(flinkconf.ZooKeeperSessionTimeout))
	d.add("checkpoints-dir", []string{ha.CheckpointsDir}, src(flinkconf.CheckpointsDir))

	root, err := commonFlinkDir(ha.CheckpointsDir, ha.StorageDir)
	if err != nil {
		return nil, err
	}
	if root.local != "" {
		d.add("mountpoint", root.local, "holds the checkpoint directory and "+flinkconf.HAStorageDir.Key+", where Flink reads and writes them")
	} else {
		d.notes = append(d.notes, "Flink writes to "+root.uri+", not to a local directory: no ckptfs mount can sit in front of it; status and takeover verify the copy under backing")
	}
	if backing != "" && root.local != "" && (isBelowURI(backing, root.local) || isBelowURI(root.local, backing)) {
		return nil, fmt.Errorf("--backing %s and the mountpoint %s must not contain each other: the mount would read through itself", backing, root.local)
	}
	if backing != "" {
		d.add("backing", backing, "--backing")
		d.add("map", []string{root.uri + "=" + backing}, "Flink's paths under "+root.uri+" are under the backing on this site")
	} else {
		d.todo = append(d.todo,
			"backing: where this site mounts the NAS or its replica (give --backing)",
			"map: ["+root.uri+"=<backing>] so that Flink's absolute paths resolve on this site")
	}
	if ha.SavepointsDir != "" {
		if !isBelowURI(ha.SavepointsDir, root.uri) {
			d.notes = append(d.notes, "savepoints ("+ha.SavepointsDir+") are outside "+root.uri+": ckptfs neither verifies nor hides them")
		}
	}
	return d, nil
}

// flinkDir is a directory Flink writes to: its URI and, for file: URIs,
// the local path.
type flinkDir struct {
	uri   string
	local string
}

// commonFlinkDir is the deepest directory holding both URIs; it must be
// below the file system's root.
func commonFlinkDir(a, b string) (flinkDir, error) {
	ua, err := parseFlinkURI(a)
	if err != nil {
		return flinkDir{}, err
	}
	ub, err := parseFlinkURI(b)
	if err != nil {
		return flinkDir{}, err
	}
	noCommon := fmt.Errorf("the checkpoint directory %s and %s %s share no directory: ckptfs serves both from one tree, so put them under one directory (for example file:///flink/checkpoints and file:///flink/ha)", a, flinkconf.HAStorageDir.Key, b)
	if ua.Scheme != ub.Scheme || ua.Host != ub.Host {
		return flinkDir{}, noCommon
	}
	ea := strings.Split(strings.Trim(ua.Path, "/"), "/")
	eb := strings.Split(strings.Trim(ub.Path, "/"), "/")
	n := 0
	for n < len(ea) && n < len(eb) && ea[n] == eb[n] && ea[n] != "" {
		n++
	}
	if n == 0 {
		return flinkDir{}, noCommon
	}
	dir := "/" + strings.Join(ea[:n], "/")
	if ua.Scheme == "file" {
		return flinkDir{uri: "file://" + dir, local: dir}, nil
	}
	return flinkDir{uri: ua.Scheme + "://" + ua.Host + dir}, nil
}

// parseFlinkURI parses an absolute Flink URI; a plain path is a file.
func parseFlinkURI(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme == "" {
		u.Scheme = "file"
	}
	if u.Scheme == "file" && u.Host == "localhost" {
		u.Host = ""
	}
	if u.Scheme == "file" && u.Host != "" {
		return nil, fmt.Errorf("%s names a remote host", s)
	}
	if !strings.HasPrefix(u.Path, "/") {
		return nil, fmt.Errorf("%s has no absolute path", s)
	}
	u.Path = path.Clean(u.Path)
	return u, nil
}

func isBelowURI(uri, dir string) bool {
	u, err := parseFlinkURI(uri)
	if err != nil {
		return false
	}
	d, err := parseFlinkURI(dir)
	if err != nil {
		return false
	}
	return u.Scheme == d.Scheme && u.Host == d.Host && (u.Path == d.Path || strings.HasPrefix(u.Path, strings.TrimSuffix(d.Path, "/")+"/"))
}

// writeYAML prints the settings with a comment on where each came from.
func (d *derivedConfig) writeYAML(w io.Writer, fc *flinkconf.Config) error {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, s := range d.settings {
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: s.key}
		var v *yaml.Node
		switch val := s.value.(type) {
		case string:
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: val, LineComment: s.why}
		case []string:
			k.LineComment = s.why
			v = &yaml.Node{Kind: yaml.SequenceNode}
			for _, item := range val {
				v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: item})
			}
		default:
			return fmt.Errorf("setting %s: unexpected value %T", s.key, s.value)
		}
		m.Content = append(m.Content, k, v)
	}
	head := []string{
		"ckptfs configuration derived by `ckptfs config from-flink` from",
		fc.Path + ", read as " + fc.Format.String() + ".",
		"Keys are the long flags of ckptfs; flags and CKPTFS_<KEY> override them.",
	}
	m.Content[0].HeadComment = strings.Join(head, "\n")
	var foot []string
	if len(d.todo) > 0 {
		foot = append(foot, "To add:")
		for _, t := range d.todo {
			foot = append(foot, "  "+t)
		}
	}
	for _, n := range d.notes {
		foot = append(foot, "Note: "+n)
	}
	m.FootComment = strings.Join(foot, "\n")
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{m}}); err != nil {
		return err
	}
	return enc.Close()
}

func newConfigCheckCmd(checks settingsChecks) *cobra.Command {
	var flinkConf string
	cmd := &cobra.Command{
		Use:   "check --config FILE",
		Short: "Check a configuration file against every command",
		Long: `Check reads the configuration file (--config, else $CKPTFS_CONFIG) as every
command reads it: each key must be a setting of some command, its value
must parse as that command's flag, and each command's own validation of
its settings must pass (the values it refuses when it runs). It prints
which commands use each key. A setting a command requires but the file
leaves out (mount's backing, takeover's site, ...) may still come from
the command line or the environment: check does not require it.

With --flink-conf, it also warns when Flink's checkpoint retention is not
RETAIN_ON_CANCELLATION or its restart strategy ends in FAILED after
bounded failures: a job that reaches FAILED after a failover loses its
pointers, HA files and job graph, and without that retention its
checkpoint data, deleted by Flink itself (each warning names the key).

With zk, it warns (on stderr, exit status 0) when ckptfs would connect
anonymously, so that every ZooKeeper client could write its znodes; when
flink-zk-acl says Flink's znodes are its own identity's only and ckptfs
has no credentials; and when zk-auth-file is readable by others. It also
warns when metrics-addr is not loopback and metrics-tls-cert,
metrics-tls-key and metrics-tls-client-ca do not guard it, and when
mode is primary without zk: nothing fences such a mount.

Exit status:
  0  the file is valid
  3  it is not, or cannot be read`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := openConfigFile(cmd)
			if err != nil {
				return fail("%v", err)
			}
			if file == nil {
				return fail("no configuration file: give --config FILE or set %s", configEnv)
			}
			users := map[string][]string{}
			var errs []error
			seen := map[string]bool{}
			add := func(err error) {
				if !seen[err.Error()] {
					seen[err.Error()] = true
					errs = append(errs, err)
				}
			}
			for _, c := range settingCommands(cmd.Root()) {
				for _, f := range commandSettings(c) {
					if _, ok := file.entries[f.Name]; ok {
						users[f.Name] = append(users[f.Name], c.Name())
					}
				}
				if err := fillSettings(c, file, noEnv); err != nil {
					add(err)
					continue
				}
				// The command's own check, as it runs it.
				for _, err := range leaves(checkSettings(c, checks[c])) {
					if se := (*settingError)(nil); !errors.As(err, &se) || !se.missing {
						add(err)
					}
				}
			}
			if err := errors.Join(errs...); err != nil {
				return fail("%v", err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: %d keys, valid\n", file.path, len(file.entries))
			for _, k := range sortedEntryKeys(file.entries) {
				fmt.Fprintf(w, "  %-22s line %-4d used by %s\n", k, file.entries[k].line, strings.Join(users[k], ", "))
			}
			warnings, identity := fileConnectionWarnings(file)
			var replication string
			var syncTimeout time.Duration
			for _, c := range settingCommands(cmd.Root()) {
				if c.Name() == "mount" {
					warnings = append(warnings, fileMountWarnings(c)...)
					replication = c.Flags().Lookup("replication-mode").Value.String()
					syncTimeout, _ = time.ParseDuration(c.Flags().Lookup("sync-timeout").Value.String())
				}
			}
			if flinkConf != "" {
				fc, err := flinkconf.Load(flinkConf, flinkconf.Auto)
				if err != nil {
					return fail("%v", err)
				}
				warnings = append(warnings, fc.RecoveryWarnings()...)
				if replication == "sync" || replication == "strict" {
					warnings = append(warnings, fc.SyncWarnings(replication, syncTimeout)...)
				}
			}
			if identity != "" {
				fmt.Fprintf(w, "ZooKeeper identity: %s\n", identity)
			}
			for _, warning := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "ckptfs: warning:", warning)
			}
			return nil
		},
	}
	cmd.Flags().String(configFlag, "", "YAML configuration `FILE` (default $"+configEnv+")")
	cmd.Flags().StringVar(&flinkConf, "flink-conf", "", "also check Flink's configuration `FILE` (config.yaml or flink-conf.yaml) for settings that let Flink delete checkpoints after a failover")
	return cmd
}

// settingCommands lists the commands under root that declare settings.
func settingCommands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if len(commandSettings(c)) > 0 {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}
