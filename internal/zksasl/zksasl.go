// Package zksasl logs a ZooKeeper connection in with SASL DIGEST-MD5
// (RFC 2831), as ZooKeeper's Java client does with a JAAS
// DigestLoginModule, for go-zookeeper, which has no SASL.
//
// # Why
//
// Flink's ZooKeeper client has an identity only through SASL up to
// Flink 1.19 (a JAAS Client section: Kerberos, or a DigestLoginModule
// with a user name and password), and a znode Flink creates with
// high-availability.zookeeper.client.acl: creator then lets only that
// identity, sasl:<user>, in. A ZooKeeper that sets enforce.auth.schemes
// to sasl refuses every other session. For the DigestLoginModule case
// ckptfs can log in as the same user; Kerberos (GSSAPI) it cannot.
//
// # How
//
// After the server answered the connect request, and before anything
// else is sent, the client sends an empty token in a SASL request
// (opcode 102), gets the digest-challenge, sends its digest-response and
// gets rspauth back; the server then adds sasl:<user> to the session's
// identities. ZooKeeper names the service zookeeper/zk-sasl-md5 when it
// authenticates by DIGEST-MD5 (org.apache.zookeeper.client.
// ZooKeeperSaslClient, ZooKeeperSaslServer).
//
// go-zookeeper's Conn offers no hook between the connect response and
// its first request. Wrap is that hook: the net.Conn a dialer gives
// go-zookeeper (zk.WithDialer) which, when go-zookeeper reads the connect
// response, reads it from the server, logs in on the same stream, and
// only then hands the response over. Every connection, each reconnect
// included, logs in before its first request, as the Java client does.
package zksasl

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

const (
	opSASL = 102
	// saslService and saslServerName form the digest-uri ZooKeeper's
	// server expects.
	saslService    = "zookeeper"
	saslServerName = "zk-sasl-md5"
	// saslXID numbers our two requests; the server echoes them. They are
	// far above go-zookeeper's, which start at 1 on every connection.
	saslXID = 0x7fff0000
	// maxSASLReply bounds a reply of the SASL exchange.
	maxSASLReply = 64 << 10
)

// ErrRefused marks a SASL login the server refused.
var ErrRefused = errors.New("SASL login refused")

// Wrap returns conn, which go-zookeeper is about to use, logging in as
// user with password right after ZooKeeper's connect response. report,
// if not nil, gets the outcome of each login (nil: logged in); a failed
// login also fails go-zookeeper's read, which then reconnects. timeout
// bounds the login's exchange.
func Wrap(conn net.Conn, user, password string, timeout time.Duration, report func(error)) net.Conn {
	if report == nil {
		report = func(error) {}
	}
	return &saslConn{Conn: conn, user: user, password: password, timeout: timeout, report: report}
}

// saslConn logs one connection in; see the package documentation.
type saslConn struct {
	net.Conn
	user, password string
	timeout        time.Duration
	report         func(error)

	started bool
	pending []byte // the connect response, handed over after the login
}

func (s *saslConn) Read(p []byte) (int, error) {
	if !s.started {
		s.started = true
		resp, err := readFrame(s.Conn, maxSASLReply)
		if err != nil {
			return 0, err
		}
		// ConnectResponse: protocolVersion int32, timeOut int32,
		// sessionID int64, passwd buffer. A session id of 0 means the
		// session expired; go-zookeeper handles that, no login needed.
		if len(resp) >= 16 && binary.BigEndian.Uint64(resp[8:16]) != 0 {
			err := s.login()
			s.report(err)
			if err != nil {
				return 0, err
			}
		}
		s.pending = frame(resp)
	}
	if len(s.pending) > 0 {
		n := copy(p, s.pending)
		s.pending = s.pending[n:]
		return n, nil
	}
	return s.Conn.Read(p)
}

// login runs the DIGEST-MD5 exchange.
func (s *saslConn) login() error {
	if err := s.Conn.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		return err
	}
	defer s.Conn.SetDeadline(time.Time{})
	challenge, err := s.roundTrip(saslXID+1, nil)
	if err != nil {
		return err
	}
	cnonce, err := newCnonce()
	if err != nil {
		return err
	}
	resp, rspauth, err := digestResponse(s.user, s.password, challenge, cnonce)
	if err != nil {
		return err
	}
	final, err := s.roundTrip(saslXID+2, resp)
	if err != nil {
		return err
	}
	if string(final) != rspauth {
		return fmt.Errorf("%w: the server's rspauth does not match: it does not know the password either", ErrRefused)
	}
	return nil
}

// roundTrip sends one SASL request and returns the token of its reply.
func (s *saslConn) roundTrip(xid int32, token []byte) ([]byte, error) {
	var req bytes.Buffer
	binary.Write(&req, binary.BigEndian, xid)
	binary.Write(&req, binary.BigEndian, int32(opSASL))
	binary.Write(&req, binary.BigEndian, int32(len(token)))
	req.Write(token)
	if _, err := s.Conn.Write(frame(req.Bytes())); err != nil {
		return nil, err
	}
	reply, err := readFrame(s.Conn, maxSASLReply)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("%w: the server closed the connection", ErrRefused)
	}
	if err != nil {
		return nil, err
	}
	// ReplyHeader: xid int32, zxid int64, err int32; then the
	// SetSASLResponse's token buffer.
	if len(reply) < 16 {
		return nil, fmt.Errorf("SASL reply of %d bytes: too short", len(reply))
	}
	if got := int32(binary.BigEndian.Uint32(reply[0:4])); got != xid {
		return nil, fmt.Errorf("SASL reply to request %d, want %d", got, xid)
	}
	if code := int32(binary.BigEndian.Uint32(reply[12:16])); code != 0 {
		return nil, fmt.Errorf("%w: ZooKeeper error %d", ErrRefused, code)
	}
	body := reply[16:]
	if len(body) < 4 {
		return nil, nil
	}
	n := int32(binary.BigEndian.Uint32(body[:4]))
	if n < 0 {
		return nil, nil
	}
	if int(n) > len(body)-4 {
		return nil, fmt.Errorf("SASL token of %d bytes in a reply of %d", n, len(reply))
	}
	return body[4 : 4+n], nil
}

func frame(b []byte) []byte {
	out := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(out, uint32(len(b)))
	copy(out[4:], b)
	return out
}

// readFrame reads one length-prefixed packet of at most max bytes.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > uint32(max) {
		return nil, fmt.Errorf("packet of %d bytes from ZooKeeper: more than %d", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func newCnonce() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// digestResponse computes the digest-response to a digest-challenge
// (RFC 2831 §2.1.2, qop auth) and the rspauth the server must answer.
func digestResponse(username, password string, challenge []byte, cnonce string) (resp []byte, rspauth string, err error) {
	return digestResponseURI(username, password, challenge, cnonce, saslService+"/"+saslServerName)
}

// digestResponseURI is digestResponse for the digest-uri uri.
func digestResponseURI(username, password string, challenge []byte, cnonce, uri string) (resp []byte, rspauth string, err error) {
	d, err := parseDirectives(string(challenge))
	if err != nil {
		return nil, "", fmt.Errorf("SASL digest-challenge: %w", err)
	}
	nonce := d["nonce"]
	if nonce == "" {
		return nil, "", errors.New("SASL digest-challenge without a nonce")
	}
	if alg := d["algorithm"]; alg != "md5-sess" {
		return nil, "", fmt.Errorf("SASL digest-challenge: algorithm %q, want md5-sess", alg)
	}
	if qop := d["qop"]; qop != "" && !slicesContainsToken(qop, "auth") {
		return nil, "", fmt.Errorf("SASL digest-challenge offers qop %q, not auth", qop)
	}
	utf8 := d["charset"] == "utf-8"
	user, err := digestString(username, utf8)
	if err != nil {
		return nil, "", err
	}
	pass, err := digestString(password, utf8)
	if err != nil {
		return nil, "", err
	}
	realm := d["realm"] // ZooKeeper offers one, zk-sasl-md5
	const nc = "00000001"
	inner := md5.Sum(bytes.Join([][]byte{user, []byte(realm), pass}, []byte(":")))
	a1 := md5.Sum([]byte(string(inner[:]) + ":" + nonce + ":" + cnonce))
	ha1 := hex.EncodeToString(a1[:])
	kd := func(a2 string) string {
		h2 := md5.Sum([]byte(a2))
		sum := md5.Sum([]byte(ha1 + ":" + nonce + ":" + nc + ":" + cnonce + ":auth:" + hex.EncodeToString(h2[:])))
		return hex.EncodeToString(sum[:])
	}
	var b strings.Builder
	if utf8 {
		b.WriteString("charset=utf-8,")
	}
	fmt.Fprintf(&b, `username=%s,realm=%s,nonce=%s,nc=%s,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=auth`,
		quoteDirective(username), quoteDirective(realm), quoteDirective(nonce), nc, cnonce, uri, kd("AUTHENTICATE:"+uri))
	return []byte(b.String()), "rspauth=" + kd(":"+uri), nil
}

// quoteDirective writes a quoted-string value.
func quoteDirective(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

func slicesContainsToken(list, tok string) bool {
	for _, t := range strings.Split(list, ",") {
		if strings.TrimSpace(t) == tok {
			return true
		}
	}
	return false
}

// digestString encodes a user name or password as RFC 2831 hashes it:
// ISO 8859-1 when every character is in it, else UTF-8 (only allowed
// when the server offered charset=utf-8).
func digestString(s string, utf8 bool) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xff {
			if !utf8 {
				return nil, errors.New("SASL: a character of the user name or password is not ISO 8859-1 and the server offers no UTF-8")
			}
			return []byte(s), nil
		}
		out = append(out, byte(r))
	}
	return out, nil
}

// parseDirectives parses a digest-challenge: name=value pairs separated
// by commas, values plain or quoted (with backslash escapes). A repeated
// directive keeps its first value.
func parseDirectives(s string) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i == len(s) {
			break
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return nil, fmt.Errorf("directive without a value at byte %d", i)
		}
		name := strings.ToLower(strings.TrimSpace(s[i : i+eq]))
		i += eq + 1
		var v strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					v.WriteByte(s[i])
					i++
					continue
				}
				if c == '"' {
					closed = true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted value of %s", name)
			}
		} else {
			j := strings.IndexByte(s[i:], ',')
			if j < 0 {
				j = len(s) - i
			}
			v.WriteString(strings.TrimSpace(s[i : i+j]))
			i += j
		}
		if _, ok := out[name]; !ok {
			out[name] = v.String()
		}
	}
	return out, nil
}
