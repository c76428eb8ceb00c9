package zksasl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The example of RFC 2831 §4, and the challenge ZooKeeper 3.8's
// DigestMD5Server sent (a real one, nonce from a run against Debian's
// zookeeper 3.8.0) with the response Java's DIGEST-MD5 client
// (javax.security.sasl) computed for user flink, password secret and the
// cnonce below.
func TestDigestResponse(t *testing.T) {
	for _, tc := range []struct {
		name, user, pass, challenge, cnonce, uri, want string
	}{
		{"rfc2831", "chris", "secret", `realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,charset=utf-8`,
			"OA6MHXh6VqTrRk", "imap/elwood.innosoft.com", "d388dad90d4bbd760a152321f2143af7"},
		{"java", "flink", "secret", `realm="zk-sasl-md5",nonce="abc",charset=utf-8,algorithm=md5-sess`,
			"iWCCL4BHd/t5sGouyHjsu1KwkCZfTHx9QYZ6GdU5", "zookeeper/zk-sasl-md5", "f1a47362e18062a82bb546e0f7533c52"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, rspauth, err := digestResponseURI(tc.user, tc.pass, []byte(tc.challenge), tc.cnonce, tc.uri)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(resp), "response="+tc.want+",") {
				t.Errorf("response %s, want response=%s", resp, tc.want)
			}
			if !strings.HasPrefix(rspauth, "rspauth=") || len(rspauth) != len("rspauth=")+32 {
				t.Errorf("rspauth %q", rspauth)
			}
		})
	}
	// RFC 2831's example gives rspauth for the same exchange.
	_, rspauth, _ := digestResponseURI("chris", "secret", []byte(`realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,charset=utf-8`), "OA6MHXh6VqTrRk", "imap/elwood.innosoft.com")
	if rspauth != "rspauth=ea40f60335c427b5527b84dbabcdfffd" {
		t.Errorf("rspauth %q, want RFC 2831's ea40f60335c427b5527b84dbabcdfffd", rspauth)
	}
}

func TestDigestResponseRefuses(t *testing.T) {
	for _, tc := range []struct{ challenge, want string }{
		{`realm="r",algorithm=md5-sess`, "without a nonce"},
		{`nonce="n",algorithm=md5`, "want md5-sess"},
		{`nonce="n",algorithm=md5-sess,qop="auth-conf"`, "not auth"},
		{`nonce="n,algorithm=md5-sess`, "unterminated"},
		{`=x`, "without a value"},
	} {
		if _, _, err := digestResponse("u", "p", []byte(tc.challenge), "c"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.challenge, err, tc.want)
		}
	}
	if _, _, err := digestResponse("ü€", "p", []byte(`nonce="n",algorithm=md5-sess`), "c"); err == nil {
		t.Errorf("a user name beyond ISO 8859-1 without charset=utf-8 was accepted")
	}
}

func TestParseDirectives(t *testing.T) {
	d, err := parseDirectives(` realm="a\"b", nonce="x,y" ,charset=utf-8,realm="second"`)
	if err != nil {
		t.Fatal(err)
	}
	if d["realm"] != `a"b` || d["nonce"] != "x,y" || d["charset"] != "utf-8" {
		t.Errorf("parsed %q", d)
	}
}

// server plays ZooKeeper's side of a connection: the connect response,
// then the SASL replies given, then what the client sends next.
func server(t *testing.T, conn net.Conn, sessionID uint64, replies ...[]byte) {
	t.Helper()
	resp := make([]byte, 36)
	binary.BigEndian.PutUint64(resp[8:16], sessionID)
	binary.BigEndian.PutUint32(resp[16:20], 16)
	conn.Write(frame(resp))
	for _, r := range replies {
		if _, err := readFrame(conn, 1<<20); err != nil {
			return
		}
		conn.Write(r)
	}
}

func reply(xid int32, code int32, token []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, xid)
	binary.Write(&b, binary.BigEndian, int64(0))
	binary.Write(&b, binary.BigEndian, code)
	binary.Write(&b, binary.BigEndian, int32(len(token)))
	b.Write(token)
	return frame(b.Bytes())
}

// A refused login fails go-zookeeper's read of the connect response and
// is reported; an expired session (id 0) needs no login.
func TestWrapRefusedAndExpired(t *testing.T) {
	c, s := net.Pipe()
	var reported error
	go server(t, s, 7, reply(saslXID+1, 0, []byte(`realm="zk-sasl-md5",nonce="n",charset=utf-8,algorithm=md5-sess`)), reply(saslXID+2, -124, nil))
	w := Wrap(c, "flink", "wrong", 5*time.Second, func(err error) { reported = err })
	if _, err := w.Read(make([]byte, 4)); !errors.Is(err, ErrRefused) || !errors.Is(reported, ErrRefused) {
		t.Errorf("refused login: read %v, reported %v", err, reported)
	}
	c.Close()
	s.Close()

	c, s = net.Pipe()
	defer c.Close()
	defer s.Close()
	go server(t, s, 0)
	w = Wrap(c, "flink", "pw", 5*time.Second, func(err error) { t.Errorf("an expired session logged in: %v", err) })
	var hdr [4]byte
	if _, err := io.ReadFull(w, hdr[:]); err != nil || binary.BigEndian.Uint32(hdr[:]) != 36 {
		t.Errorf("connect response of an expired session: %v, %x", err, hdr)
	}
}

// FuzzExchange: whatever a server sends during the login, Wrap ends with
// a connect response or an error, bounded, without panicking.
func FuzzExchange(f *testing.F) {
	f.Add([]byte(`realm="zk-sasl-md5",nonce="5F2tHbI/NbQz/yIAbR4FcFDQjYYZvpdlqWeObJ63",charset=utf-8,algorithm=md5-sess`), []byte("rspauth=d3138ce2a7b5d58cebc1af11256373fd"), int32(0))
	f.Add([]byte{}, []byte{}, int32(-124))
	f.Fuzz(func(t *testing.T, challenge, final []byte, code int32) {
		c, s := net.Pipe()
		defer c.Close()
		defer s.Close()
		go func() {
			server(t, s, 1, reply(saslXID+1, 0, challenge), reply(saslXID+2, code, final))
			s.Close()
		}()
		w := Wrap(c, "flink", "secret", 2*time.Second, nil)
		w.Read(make([]byte, 64))
	})
}

// FuzzDigestResponse: any challenge gives a response or an error.
func FuzzDigestResponse(f *testing.F) {
	f.Add([]byte(`realm="zk-sasl-md5",nonce="5F2tHbI/NbQz/yIAbR4FcFDQjYYZvpdlqWeObJ63",charset=utf-8,algorithm=md5-sess`))
	f.Add([]byte(`realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,charset=utf-8`))
	f.Fuzz(func(t *testing.T, challenge []byte) {
		digestResponse("flink", "secret", challenge, "cnonce")
	})
}
