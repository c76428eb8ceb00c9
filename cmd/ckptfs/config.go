package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Settings are the long flags a command defines with addSettings. Each
// one can also be given in the environment as CKPTFS_<NAME> (upper case,
// "-" as "_") and in the YAML configuration file as "<name>: value" (a
// list for repeatable flags). Precedence: command line, environment,
// file, the flag's default. The file is shared by every command: a key is
// refused only when no command knows it, and each command takes the keys
// it defined. Adding a setting is one line: its flag, defined inside the
// command's addSettings.
const (
	settingAnnotation = "ckptfs-setting"
	// originAnnotation holds where a setting's value came from, when not
	// from the command line: its variable, or FILE:LINE.
	originAnnotation = "ckptfs-origin"
	configFlag       = "config"
	configEnv        = "CKPTFS_CONFIG"
	envPrefix        = "CKPTFS_"
	// maxConfigSize bounds what is read of a configuration file.
	maxConfigSize = 1 << 20
)

// renamedKeys are file keys accepted under an earlier name.
var renamedKeys = map[string]string{"roots": "root"}

// retiredKeys are settings a mechanism replaced: each is refused, in the
// file and on the command line, with what replaced it.
var retiredKeys = map[string]string{
	"lease": "lease is retired: with zk every mount holds its site's lease (lease-duration, 20s by default) and fences itself half a lease after its last renewal, cut off or not (docs/design.md §5.14); remove the setting",
}

// addSettings adds to cmd the flags define defines, as settings, and
// --config.
func addSettings(cmd *cobra.Command, define func(f *pflag.FlagSet)) {
	fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	define(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[settingAnnotation] = []string{"true"}
	})
	cmd.Flags().AddFlagSet(fs)
	if cmd.Flags().Lookup(configFlag) == nil {
		cmd.Flags().String(configFlag, "", "YAML configuration `FILE` (default $"+configEnv+")")
	}
}

func isSetting(f *pflag.Flag) bool { return f.Annotations[settingAnnotation] != nil }

// settingEnv is the environment variable of a setting.
func settingEnv(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// commandSettings lists the settings cmd declared, sorted by name.
func commandSettings(cmd *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if isSetting(f) {
			out = append(out, f)
		}
	})
	return out
}

// knownSettings is the set of settings of every command under root.
func knownSettings(root *cobra.Command) map[string]bool {
	known := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, f := range commandSettings(c) {
			known[f.Name] = true
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return known
}

// applySettings fills the settings of cmd that are not on the command line
// from the environment, then from the configuration file.
func applySettings(cmd *cobra.Command) error {
	if len(commandSettings(cmd)) == 0 {
		return nil
	}
	file, err := openConfigFile(cmd)
	if err != nil {
		return err
	}
	return fillSettings(cmd, file, os.LookupEnv)
}

// openConfigFile reads the file of --config, else of $CKPTFS_CONFIG; nil
// when neither names one.
func openConfigFile(cmd *cobra.Command) (*configFile, error) {
	path, _ := cmd.Flags().GetString(configFlag)
	if path == "" {
		path = os.Getenv(configEnv)
	}
	if path == "" {
		return nil, nil
	}
	return readConfigFile(path, knownSettings(cmd.Root()))
}

// lookupEnv is os.LookupEnv, or noEnv.
type lookupEnv func(string) (string, bool)

func noEnv(string) (string, bool) { return "", false }

// fillSettings gives each setting of cmd not on the command line its value
// from env (an empty variable counts as unset), else from file (which may
// be nil). A setting filled this way counts as given (Changed).
func fillSettings(cmd *cobra.Command, file *configFile, env lookupEnv) error {
	for _, f := range commandSettings(cmd) {
		if f.Changed {
			continue
		}
		if v, ok := env(settingEnv(f.Name)); ok && v != "" {
			if err := setFlag(f, envValues(f, v)); err != nil {
				return fmt.Errorf("%s: %s: %w", settingEnv(f.Name), f.Name, err)
			}
			f.Annotations[originAnnotation] = []string{settingEnv(f.Name)}
			continue
		}
		if file == nil {
			continue
		}
		if e, ok := file.entries[f.Name]; ok {
			origin := fmt.Sprintf("%s:%d", file.path, e.line)
			if err := setFlagFromYAML(f, e.value); err != nil {
				return fmt.Errorf("%s: %s: %w", origin, f.Name, err)
			}
			f.Annotations[originAnnotation] = []string{origin}
		}
	}
	return nil
}

// settingError is a problem with the value of one setting; its message
// names the setting. located prefixes where the value came from.
type settingError struct {
	name string
	// missing: the setting is required and not set; the command line
	// may still give it (config check lets it pass).
	missing bool
	err     error
}

func (e *settingError) Error() string { return e.err.Error() }

func (e *settingError) Unwrap() error { return e.err }

// badSetting is a problem with the value of setting name; the message
// names it.
func badSetting(name, format string, args ...any) error {
	return &settingError{name: name, err: fmt.Errorf(format, args...)}
}

// missingSetting says that setting name is required and not set.
func missingSetting(name, format string, args ...any) error {
	return &settingError{name: name, missing: true, err: fmt.Errorf(format, args...)}
}

// leaves flattens joined errors.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

// located prefixes each problem of err with a setting with where the
// setting's value came from in cmd: its environment variable or the
// file and line. A value from the command line is named by the message.
func located(cmd *cobra.Command, err error) error {
	var out []error
	for _, e := range leaves(err) {
		var se *settingError
		if errors.As(e, &se) {
			if f := cmd.Flags().Lookup(se.name); f != nil && f.Changed && len(f.Annotations[originAnnotation]) == 1 {
				e = fmt.Errorf("%s: %w", f.Annotations[originAnnotation][0], e)
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// settingsCheck validates the settings of one command, filled, as the
// command itself does before it acts; config check runs it on a file.
type settingsCheck func() error

// settingsChecks holds the check of each command with settings.
type settingsChecks map[*cobra.Command]settingsCheck

// checkSettings runs cmd's check (nil: none); its errors name where each
// bad value came from.
func checkSettings(cmd *cobra.Command, check settingsCheck) error {
	if check == nil {
		return nil
	}
	return located(cmd, check())
}

// envValues splits the value of a repeatable setting at commas.
func envValues(f *pflag.Flag, v string) []string {
	if _, ok := f.Value.(pflag.SliceValue); !ok {
		return []string{v}
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// setFlag gives f the values, as if from the command line.
func setFlag(f *pflag.Flag, values []string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(values); err != nil {
			return fmt.Errorf("invalid value %q: %v", values, err)
		}
	} else {
		if len(values) != 1 {
			return fmt.Errorf("want one value, not a list")
		}
		if err := f.Value.Set(values[0]); err != nil {
			return fmt.Errorf("invalid value %q: %v", values[0], err)
		}
	}
	f.Changed = true
	return nil
}

// setFlagFromYAML gives f a scalar or a list of scalars; null leaves the
// default.
func setFlagFromYAML(f *pflag.Flag, n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return setFlag(f, []string{n.Value})
	case yaml.SequenceNode:
		if _, ok := f.Value.(pflag.SliceValue); !ok {
			return fmt.Errorf("want one value, not a list")
		}
		values := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: want a list of plain values", item.Line)
			}
			values = append(values, item.Value)
		}
		return setFlag(f, values)
	}
	return fmt.Errorf("want a value or a list of values")
}

// configFile is a parsed configuration file: its top-level keys.
type configFile struct {
	path    string
	entries map[string]configEntry
}

type configEntry struct {
	value *yaml.Node
	line  int
}

// readConfigFile parses the YAML file at path and refuses keys that are
// not in known, naming the key and its line.
func readConfigFile(path string, known map[string]bool) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a ckptfs configuration", path, maxConfigSize)
	}
	return parseConfig(path, data, known)
}

func parseConfig(path string, data []byte, known map[string]bool) (*configFile, error) {
	cf := &configFile{path: path, entries: map[string]configEntry{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cf, nil // empty file
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: more than one YAML document", path)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cf, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of settings (key: value)", path, root.Line)
	}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%s:%d: a key must be a plain name", path, k.Line))
			continue
		}
		name := k.Value
		if renamed, ok := renamedKeys[name]; ok {
			name = renamed
		}
		if why, ok := retiredKeys[name]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: %s", path, k.Line, why))
			continue
		}
		if !known[name] {
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q%s", path, k.Line, k.Value, suggestKey(k.Value, known)))
			continue
		}
		if prev, ok := cf.entries[name]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: key %q repeats line %d", path, k.Line, k.Value, prev.line))
			continue
		}
		cf.entries[name] = configEntry{value: v, line: k.Line}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cf, nil
}

// suggestKey names the known key closest to a misspelt one.
func suggestKey(name string, known map[string]bool) string {
	best, bestDist := "", 3
	for k := range known {
		if d := editDistance(name, k); d < bestDist || (d == bestDist && best != "" && k < best) {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sortedEntryKeys lists the keys of a configuration file in order.
func sortedEntryKeys(m map[string]configEntry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
