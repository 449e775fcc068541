package classify

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// plainText undoes the percent-encoding of a message. It may arrive as
// gRPC sends its status message: grpc-message is UTF-8, percent-encoded.
// A hop that forgets to decode it passes
// "Developer%20instruction%20is%20not..." on. It may also arrive
// form-encoded ("This+model%27s+maximum+context+length"). A message
// that does not decode is returned as it is.
//
// A message with a space in it is text, unless it is encoded as the gRPC
// spec encodes a status message: printable ASCII, the space included,
// stays as it is; every other byte and '%' is escaped
// ("%E7%94%A8%E6%88%B7%E9%A2%9D%E5%BA%A6%E4%B8%8D%E8%B6%B3, %E5%89%A9...").
// Such a message is decoded only when each '%' starts an escape of a
// byte gRPC escapes and the result is UTF-8: text that holds a percent
// sign ("usage at 100% of the limit", "Incorrect%20API key") stays.
func plainText(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if strings.IndexByte(s, ' ') >= 0 {
		return grpcText(s)
	}
	if t, err := url.QueryUnescape(s); err == nil {
		return t
	}
	return s
}

// grpcText decodes s if it is a status message in gRPC's encoding
// (plainText), else returns it as it is.
func grpcText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return s
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if c >= 0x20 && c <= 0x7e && c != '%' {
			return s // gRPC leaves printable ASCII as it is: this is not its encoding
		}
		b.WriteByte(c)
		i += 2
	}
	if t := b.String(); utf8.ValidString(t) {
		return t
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
