package flinkconf

import (
	"math"
	"testing"
)

// Java's Double.toString (YAML's names for the infinities) for the values a configuration holds; the
// real-Flink test (integration/realflink) holds the whole reader against
// Flink's.
func TestJavaDouble(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1500, "1500.0"},
		{0.5, "0.5"},
		{0.001, "0.001"},
		{0.000999, "9.99E-4"},
		{9999999, "9999999.0"},
		{1e7, "1.0E7"},
		{123456789, "1.23456789E8"},
		{1.25e-10, "1.25E-10"},
		{-2.5, "-2.5"},
		{100, "100.0"},
		{math.Copysign(0, -1), "-0.0"},
		{0, "0.0"},
		{math.Inf(-1), "-.inf"},
		{math.NaN(), ".nan"},
	} {
		if got := javaDouble(tc.f); got != tc.want {
			t.Errorf("javaDouble(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestCoreSchemaValues(t *testing.T) {
	c, err := Parse("config.yaml", []byte(`a: 0x1F
b: 0o17
c: +12
d: 007
e: True
f: yes
g: 1.5e3
h: .inf
i: '0x1F'
j: [1, '2', x y, 'a: b', "", ~]
k: !!str 12
l: 1_000
`), Auto)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"a": "31", "b": "15", "c": "12", "d": "7", "e": "true", "f": "yes", "g": "1500.0",
		"h": ".inf", "i": "0x1F", "j": "[1, '2', x y, 'a: b', '', null]", "k": "12", "l": "1_000",
	} {
		if v, _ := c.Get(k); v.Value != want {
			t.Errorf("%s: %q, want %q", k, v.Value, want)
		}
	}
	if _, err := Parse("config.yaml", []byte("a: 1\nb: null\n"), Auto); err == nil {
		t.Error("a key without a value: no error; Flink refuses the file")
	}
}
