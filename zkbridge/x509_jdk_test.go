package zkbridge

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/jdktest"
)

// rfc2253 names a client certificate's subject as ZooKeeper's x509
// provider does by default, X500Principal.getName(): proven against the
// JDK for plain, multi-attribute, multi-valued, escaped, non-string and
// unknown-attribute subjects.
func TestRFC2253MatchesJDK(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a JDK")
	}
	oid := func(s ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(s) }
	names := []pkix.RDNSequence{
		pkix.Name{CommonName: "ckptfs-super"}.ToRDNSequence(),
		pkix.Name{CommonName: "ckptfs dc2", Organization: []string{"Example, Inc."}, OrganizationalUnit: []string{"ops", "flink"}, Country: []string{"DE"}, Locality: []string{"Köln"}, Province: []string{"NRW"}, StreetAddress: []string{"Ring 1"}, SerialNumber: "42", PostalCode: []string{"50667"}}.ToRDNSequence(),
		{{{Type: oid(2, 5, 4, 3), Value: "#lead and trail "}}, {{Type: oid(2, 5, 4, 10), Value: `a+b="c"<d>;e\f`}}},
		{{{Type: oid(2, 5, 4, 3), Value: "multi"}, {Type: oid(2, 5, 4, 11), Value: "valued"}}},
		{{{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "example"}}, {{Type: oid(0, 9, 2342, 19200300, 100, 1, 1), Value: "uid7"}}, {{Type: oid(1, 2, 840, 113549, 1, 9, 1), Value: "ops@example.org"}}},
		{{{Type: oid(2, 5, 4, 3), Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagUTF8String, Bytes: []byte("Jürg")}}}},
	}
	var in strings.Builder
	var ders [][]byte
	for _, n := range names {
		der, err := asn1.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		ders = append(ders, der)
		in.WriteString(base64.StdEncoding.EncodeToString(der) + "\n")
	}
	out := jdktest.RunSource(t, `
import java.io.*;
import java.util.Base64;
import javax.security.auth.x500.X500Principal;
public class Main {
    public static void main(String[] args) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream o = new PrintStream(System.out, true, "UTF-8");
        for (String line; (line = r.readLine()) != null; ) {
            o.println(new X500Principal(Base64.getDecoder().decode(line)).getName());
        }
    }
}`, jdktest.Options{Stdin: []byte(in.String())})
	want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(want) != len(ders) {
		t.Fatalf("the JDK named %d subjects, want %d:\n%s", len(want), len(ders), out)
	}
	for i, der := range ders {
		got, err := rfc2253(der)
		if err != nil || got != want[i] {
			t.Errorf("subject %d: %q, %v; the JDK: %q", i, got, err, want[i])
		}
	}
}
