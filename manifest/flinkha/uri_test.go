package flinkha

import (
	"strings"
	"testing"
)

// uriCases are Flink paths with the URI new Path(p) holds and what
// Path.toString() gives back. The JDK test runs the same paths through
// java.net.URI.
var uriCases = []struct{ path, uri, back string }{
	{"file:/flink/cp/chk-1/_metadata", "file:/flink/cp/chk-1/_metadata", ""},
	{"/flink/cp/a", "/flink/cp/a", ""},
	{"file:///flink/cp/a", "file:///flink/cp/a", "file:/flink/cp/a"},
	{"file://localhost/flink", "file://localhost/flink", ""},
	{"hdfs://nn:8020/flink/shared/x.sst", "hdfs://nn:8020/flink/shared/x.sst", ""},
	{"s3://bucket/ck/", "s3://bucket/ck", "s3://bucket/ck"},
	{"s3://bucket", "s3://bucket", ""},
	{"file:/a//b///c", "file:/a/b/c", "file:/a/b/c"},
	{"file:/a\\b", "file:/a/b", "file:/a/b"},
	{"file:/with space/and%percent", "file:/with%20space/and%25percent", ""},
	{"file:/hash#frag?query", "file:/hash%23frag%3Fquery", ""},
	{"file:/quote\"<>[]{}|^`\\x", "file:/quote%22%3C%3E%5B%5D%7B%7D%7C%5E%60/x", "file:/quote\"<>[]{}|^`/x"},
	{"file:/keep-_.!~*'()@&=+$,;:", "file:/keep-_.!~*'()@&=+$,;:", ""},
	{"file:/ümlaut/日本/😀", "file:/ümlaut/日本/😀", ""},
	{"file:/nbsp\u00a0ideographic\u3000x", "file:/nbsp%C2%A0ideographic%E3%80%80x", ""},
	{"file:/c1\u0085control", "file:/c1%C2%85control", ""},
	{"file:/tab\tnl\n", "file:/tab%09nl%0A", ""},
	{"hdfs://name node/x", "hdfs://name%20node/x", ""},
	{"hdfs://user@host:9000/x", "hdfs://user@host:9000/x", ""},
	{"hdfs://[::1]:9000/x", "hdfs://[::1]:9000/x", ""},
	{"file:/a/./b/../c", "file:/a/c", "file:/a/c"},
	{"file:/a/b/..", "file:/a/", "file:/a/"},
	{"file:/../x", "file:/../x", ""},
	{"C:/flink/x", "/C:/flink/x", "C:/flink/x"},
	{"file:/C:/", "file:/C:/", ""},
	{"relative/dir", "relative/dir", ""},
	{"./", "", "(empty)"},
	{"a/b/../..", "", "(empty)"},
	{"/a/b/.", "/a/b/", "/a/b/"},
	{"./a:b", "./a:b", ""},
	{"x/./a:b/../c:d", "x/c:d", "x/c:d"},
	{"a:b/c", "/a:b/c", ""},
	{"ab:c/d", "", "error"},
}

func TestPathToURI(t *testing.T) {
	for _, tc := range uriCases {
		u, err := PathToURI(tc.path)
		if tc.back == "error" {
			if err == nil {
				t.Errorf("PathToURI(%q) = %q, want an error", tc.path, u)
			}
			continue
		}
		if err != nil || u != tc.uri {
			t.Errorf("PathToURI(%q) = %q, %v; want %q", tc.path, u, err, tc.uri)
			continue
		}
		back := tc.back
		switch back {
		case "":
			back = tc.path
		case "(empty)":
			back = ""
		}
		if p, err := URIToPath(u); err != nil || p != back {
			t.Errorf("URIToPath(%q) = %q, %v; want %q", u, p, err, back)
		}
	}
}

func TestPathToURIRejects(t *testing.T) {
	for _, p := range []string{"", "file:", "file:relative", "1x:/a", "-:/a", "hdfs:a/b"} {
		if u, err := PathToURI(p); err == nil {
			t.Errorf("PathToURI(%q) = %q, want an error", p, u)
		}
	}
}

func TestURIToPathRejects(t *testing.T) {
	for _, u := range []string{
		"file:/a b", "file:/a%2", "file:/a%zz", "file:/a\x00", "file:/\u3000", "x:", ":/a",
		"mailto:someone@example.com", "1x:/a", "hdfs://", "hdfs://[::1/x", "file:/a#b#c", "\xff",
	} {
		if p, err := URIToPath(u); err == nil {
			t.Errorf("URIToPath(%q) = %q, want an error", u, p)
		}
	}
}

func TestURIToPathDecoding(t *testing.T) {
	for _, tc := range []struct{ uri, path string }{
		{"file:/a%2fb", "file:/a/b"},
		{"file:/%C3%BC", "file:/ü"},
		{"file:/bad%FF%FEutf8", "file:/bad\uFFFD\uFFFDutf8"},
		{"file:/x?query#frag%20x", "file:/x#frag x"},
		{"hdfs://h%20st/x", "hdfs://h st/x"},
	} {
		if p, err := URIToPath(tc.uri); err != nil || p != tc.path {
			t.Errorf("URIToPath(%q) = %q, %v; want %q", tc.uri, p, err, tc.path)
		}
	}
	if !strings.Contains(quote("a\u2028b", pathChars), "%E2%80%A8") {
		t.Error("line separator not escaped")
	}
}
