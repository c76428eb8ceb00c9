package flinkconf

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Flink (1.19+) reads config.yaml with SnakeYAML Engine's core schema, so
// a plain scalar is a boolean, a number or null when it looks like one,
// and a string option then gets that value's Java toString: 0x1F is "31",
// 1.5e3 is "1500.0", True is "true". A null value makes Flink refuse the
// whole file (Configuration.setValueInternal: "Value must not be null.").
// GlobalConfiguration.loadYAMLResource and YamlParserUtils in
// apache/flink flink-core (1.19 to 2.x) are the reference;
// integration/realflink's TestConfigLoaderMatchesFlink holds this against
// them.

// The YAML 1.2 core schema's patterns (yaml.org/spec/1.2.2, 10.3.2).
var (
	coreNull  = regexp.MustCompile(`^(null|Null|NULL|~)?$`)
	coreBool  = regexp.MustCompile(`^(true|True|TRUE|false|False|FALSE)$`)
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	coreInf   = regexp.MustCompile(`^[-+]?\.(inf|Inf|INF)$`)
	coreNaN   = regexp.MustCompile(`^\.(nan|NaN|NAN)$`)
)

// scalarKind is what the core schema makes of a scalar.
type scalarKind int

const (
	kindString scalarKind = iota
	kindNull
	kindBool
	kindInt
	kindFloat
)

// resolve returns a scalar's kind and the string Flink's string option
// gets for it.
func resolve(n *yaml.Node) (scalarKind, string, error) {
	kind := kindString
	switch {
	case n.Style&yaml.TaggedStyle != 0:
		switch n.ShortTag() {
		case "!!str":
		case "!!null":
			kind = kindNull
		case "!!bool":
			kind = kindBool
		case "!!int":
			kind = kindInt
		case "!!float":
			kind = kindFloat
		default:
			return 0, "", fmt.Errorf("tag %s: not one Flink's YAML reader knows", n.Tag)
		}
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0:
	default:
		kind = plainKind(n.Value)
	}
	switch kind {
	case kindNull:
		return kind, "", nil
	case kindBool:
		if !coreBool.MatchString(n.Value) {
			return 0, "", fmt.Errorf("%q is not a boolean", n.Value)
		}
		return kind, strings.ToLower(n.Value), nil
	case kindInt:
		i, ok := coreInteger(n.Value)
		if !ok {
			return 0, "", fmt.Errorf("%q is not an integer", n.Value)
		}
		return kind, i.String(), nil
	case kindFloat:
		f, ok := coreFloatValue(n.Value)
		if !ok {
			return 0, "", fmt.Errorf("%q is not a number", n.Value)
		}
		return kind, javaDouble(f), nil
	}
	return kind, n.Value, nil
}

func plainKind(s string) scalarKind {
	switch {
	case coreNull.MatchString(s):
		return kindNull
	case coreBool.MatchString(s):
		return kindBool
	case coreInt.MatchString(s), coreOct.MatchString(s), coreHex.MatchString(s):
		return kindInt
	case coreFloat.MatchString(s), coreInf.MatchString(s), coreNaN.MatchString(s):
		return kindFloat
	}
	return kindString
}

func coreInteger(s string) (*big.Int, bool) {
	base := 10
	switch {
	case coreOct.MatchString(s):
		s, base = s[2:], 8
	case coreHex.MatchString(s):
		s, base = s[2:], 16
	case !coreInt.MatchString(s):
		return nil, false
	}
	return new(big.Int).SetString(strings.TrimPrefix(s, "+"), base)
}

func coreFloatValue(s string) (float64, bool) {
	switch {
	case coreNaN.MatchString(s):
		return math.NaN(), true
	case coreInf.MatchString(s):
		return math.Inf(map[bool]int{true: -1, false: 1}[s[0] == '-']), true
	case coreFloat.MatchString(s), coreInt.MatchString(s):
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil || math.IsInf(f, 0)
	}
	return 0, false
}

// javaDouble is a float as SnakeYAML Engine represents it: .nan, .inf
// and -.inf, else Java's Double.toString (plain decimals from 10^-3 to
// 10^7, computerized scientific notation outside, the shortest digits
// that name the value, at least one digit after the point).
func javaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// d.ddde±x: the shortest digits and the exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if f >= 1e-3 && f < 1e7 {
		var intPart, frac string
		if exp >= 0 {
			if len(digits) <= exp+1 {
				digits += strings.Repeat("0", exp+1-len(digits))
			}
			intPart, frac = digits[:exp+1], digits[exp+1:]
		} else {
			intPart, frac = "0", strings.Repeat("0", -exp-1)+digits
		}
		if frac == "" {
			frac = "0"
		}
		return sign + intPart + "." + frac
	}
	frac := digits[1:]
	if frac == "" {
		frac = "0"
	}
	return sign + digits[:1] + "." + frac + "E" + strconv.Itoa(exp)
}

// flowString is a sequence or mapping as Flink turns it into a string
// option's value: YAML flow style, each scalar as SnakeYAML Engine dumps
// the value it resolved to (plain where that reads back the same, else
// single-quoted, else double-quoted).
func flowString(n *yaml.Node, depth int) (string, error) {
	n = resolveAlias(n)
	if depth > maxDepth {
		return "", fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		kind, s, err := resolve(n)
		switch {
		case err != nil:
			return "", err
		case kind == kindNull:
			return "null", nil
		case kind != kindString:
			return s, nil
		}
		return dumpString(s), nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			s, err := flowString(c, depth+1)
			if err != nil {
				return "", err
			}
			items = append(items, s)
		}
		return "[" + strings.Join(items, ", ") + "]", nil
	case yaml.MappingNode:
		items := make([]string, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := flowString(n.Content[i], depth+1)
			if err != nil {
				return "", err
			}
			v, err := flowString(n.Content[i+1], depth+1)
			if err != nil {
				return "", err
			}
			items = append(items, k+": "+v)
		}
		return "{" + strings.Join(items, ", ") + "}", nil
	}
	return "", fmt.Errorf("unexpected YAML node")
}

// dumpString quotes a string in flow context as SnakeYAML Engine does.
func dumpString(s string) string {
	if plainInFlow(s) {
		return s
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || r > 0xfffd {
			return strconv.Quote(s)
		}
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// plainInFlow: s may be written plain inside a flow collection and reads
// back as the same string.
func plainInFlow(s string) bool {
	if s == "" || plainKind(s) != kindString || s != strings.TrimSpace(s) {
		return false
	}
	if strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@`") {
		return false
	}
	if strings.ContainsAny(s, ",[]{}") || strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
