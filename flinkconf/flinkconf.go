package flinkconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Format is the syntax of a Flink configuration file.
type Format int

const (
	// Auto decides by the file name: flink-conf.yaml is Legacy, any other
	// name Standard.
	Auto Format = iota
	// Legacy is flink-conf.yaml: "key: value" lines (Flink up to 1.19).
	Legacy
	// Standard is config.yaml: YAML 1.2 with nested or dotted keys (Flink
	// 1.19 and later).
	Standard
)

func (f Format) String() string {
	switch f {
	case Legacy:
		return "flink-conf.yaml (flat key: value lines)"
	case Standard:
		return "config.yaml (standard YAML)"
	}
	return "auto"
}

// ParseFormat reads "auto", "flink-conf" or "config".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "flink-conf", "legacy":
		return Legacy, nil
	case "config", "standard":
		return Standard, nil
	}
	return Auto, fmt.Errorf("format %q: want auto, flink-conf or config", s)
}

// The names Flink looks for in its configuration directory, in order.
const (
	LegacyFileName   = "flink-conf.yaml"
	StandardFileName = "config.yaml"
)

// MaxFileSize bounds what is read of a configuration file.
const MaxFileSize = 16 << 20

// Value is one configuration entry and where it came from.
type Value struct {
	Key   string // dotted, as Flink sees it
	Value string
	Line  int
}

// Config is one parsed Flink configuration file.
type Config struct {
	Path    string
	Format  Format
	entries map[string]Value
	nodes   int // flattened so far
	// Warnings name the lines Flink skips and the keys given twice.
	Warnings []string
}

// Load reads a Flink configuration file, or finds it in a directory as
// Flink does (see fileIn).
func Load(path string, format Format) (*Config, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		if path, err = fileIn(path); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a Flink configuration", path, MaxFileSize)
	}
	return Parse(path, data, format)
}

// fileIn is the file Flink reads in a configuration directory: up to
// 1.20 flink-conf.yaml, else config.yaml (1.19 and 1.20 read config.yaml
// only without flink-conf.yaml); from 2.0 config.yaml alone. A directory
// with both is read as the release beside it (../lib/flink-dist*.jar)
// would read it, and refused when there is none to tell.
func fileIn(dir string) (string, error) {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	legacy, standard := exists(LegacyFileName), exists(StandardFileName)
	switch {
	case legacy && standard:
		major, ok := distMajor(dir)
		if !ok {
			return "", fmt.Errorf("%s holds both %s and %s: Flink 1.x reads the first, 2.x the second, and no Flink distribution beside it (../lib/flink-dist*.jar) says which; give the file Flink reads", dir, LegacyFileName, StandardFileName)
		}
		if major >= 2 {
			return filepath.Join(dir, StandardFileName), nil
		}
		return filepath.Join(dir, LegacyFileName), nil
	case legacy:
		return filepath.Join(dir, LegacyFileName), nil
	case standard:
		return filepath.Join(dir, StandardFileName), nil
	}
	return "", fmt.Errorf("%s holds neither %s nor %s", dir, LegacyFileName, StandardFileName)
}

// distMajor is the major version of the Flink distribution whose conf
// directory dir is: flink-dist-2.3.0.jar or flink-dist_2.12-1.15.4.jar in
// ../lib.
func distMajor(dir string) (int, bool) {
	jars, _ := filepath.Glob(filepath.Join(dir, "..", "lib", "flink-dist*.jar"))
	if len(jars) != 1 {
		return 0, false
	}
	v := strings.TrimSuffix(filepath.Base(jars[0]), ".jar")
	if rest, ok := strings.CutPrefix(v, "flink-dist_"); ok {
		_, v, _ = strings.Cut(rest, "-")
	} else {
		v = strings.TrimPrefix(v, "flink-dist-")
	}
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil && n > 0
}

// Parse reads data as Flink reads a configuration file named path.
func Parse(path string, data []byte, format Format) (*Config, error) {
	if format == Auto {
		format = Standard
		if filepath.Base(path) == LegacyFileName {
			format = Legacy
		}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%s: not a text file", path)
	}
	c := &Config{Path: path, Format: format, entries: map[string]Value{}}
	switch format {
	case Legacy:
		c.parseLegacy(data)
	case Standard:
		if err := c.parseStandard(data); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown format %d", format)
	}
	return c, nil
}

// maxWarnings bounds the warnings kept of one file.
const maxWarnings = 20

func (c *Config) warn(format string, args ...any) {
	switch {
	case len(c.Warnings) < maxWarnings:
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s:", c.Path)+fmt.Sprintf(format, args...))
	case len(c.Warnings) == maxWarnings:
		c.Warnings = append(c.Warnings, c.Path+": more warnings left out")
	}
}

// set stores a value; a key given again keeps its last value, as in Flink.
func (c *Config) set(v Value) {
	if prev, ok := c.entries[v.Key]; ok && prev.Value != v.Value {
		c.warn("%d: %s is also set on line %d; Flink uses the later value", v.Line, v.Key, prev.Line)
	}
	c.entries[v.Key] = v
}

// parseLegacy is Flink's loadLegacyYAMLResource: cut at "#", split at the
// first ": ", trim; quotes stay in the value.
func (c *Config) parseLegacy(data []byte) {
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		conf, _, _ := strings.Cut(line, "#")
		conf = javaTrim(conf)
		if conf == "" {
			continue
		}
		key, value, ok := strings.Cut(conf, ": ")
		if !ok {
			c.warn("%d: not a key-value pair (missing space after ':'?); Flink skips it", n)
			continue
		}
		key, value = javaTrim(key), javaTrim(value)
		if key == "" || value == "" {
			c.warn("%d: key or value is empty; Flink skips it", n)
			continue
		}
		c.set(Value{Key: key, Value: value, Line: n})
	}
}

// javaTrim is Java's String.trim: it removes every character up to ' '.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// parseStandard is Flink's loadYAMLResource: a YAML mapping, flattened.
func (c *Config) parseStandard(data []byte) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("%s: not YAML: %w", c.Path, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: not a Flink configuration: want a mapping of keys", c.Path, root.Line)
	}
	return c.flatten(root, "", 0)
}

// maxDepth bounds the nesting of mappings; maxNodes the mappings and
// values flattened, which aliases could otherwise multiply without end.
const (
	maxDepth = 64
	maxNodes = 1 << 16
)

func (c *Config) flatten(m *yaml.Node, prefix string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s:%d: mappings nested deeper than %d", c.Path, m.Line, maxDepth)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolveAlias(m.Content[i+1])
		if c.nodes++; c.nodes > maxNodes {
			return fmt.Errorf("%s:%d: more than %d keys (aliases expanding?)", c.Path, k.Line, maxNodes)
		}
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s:%d: a key must be a plain value", c.Path, k.Line)
		}
		if line, ok := seen[k.Value]; ok {
			return fmt.Errorf("%s:%d: duplicate key %s (first on line %d)", c.Path, k.Line, prefix+k.Value, line)
		}
		seen[k.Value] = k.Line
		key := prefix + k.Value
		switch v.Kind {
		case yaml.MappingNode:
			if err := c.flatten(v, key+".", depth+1); err != nil {
				return err
			}
		case yaml.SequenceNode:
			s, err := flowString(v, depth+1)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: %w", c.Path, k.Line, key, err)
			}
			c.set(Value{Key: key, Value: s, Line: k.Line})
		case yaml.ScalarNode:
			kind, s, err := resolve(v)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: %w", c.Path, k.Line, key, err)
			}
			if kind == kindNull {
				return fmt.Errorf("%s:%d: %s has no value: Flink refuses the whole file (Value must not be null)", c.Path, k.Line, key)
			}
			c.set(Value{Key: key, Value: s, Line: k.Line})
		default:
			return fmt.Errorf("%s:%d: %s: unexpected YAML node", c.Path, k.Line, key)
		}
	}
	return nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxDepth; i++ {
		n = n.Alias
	}
	return n
}

// Get returns the value of exactly key.
func (c *Config) Get(key string) (Value, bool) {
	v, ok := c.entries[key]
	return v, ok
}

// Option is a Flink configuration option: its key, its deprecated keys in
// the order Flink tries them, and its default ("" for none).
type Option struct {
	Key        string
	Deprecated []string
	Default    string
}

// Lookup finds an option's value: its key, else its deprecated keys in
// order. It reports false when none is set.
func (c *Config) Lookup(o Option) (Value, bool) {
	if v, ok := c.entries[o.Key]; ok {
		return v, true
	}
	for _, k := range o.Deprecated {
		if v, ok := c.entries[k]; ok {
			return v, true
		}
	}
	return Value{}, false
}

// Keys returns every key set, sorted.
func (c *Config) Keys() []string {
	return slices.Sorted(maps.Keys(c.entries))
}
