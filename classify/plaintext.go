package classify

import (
	"net/url"
	"strings"
)

// plainText undoes the percent-encoding of a message. It may arrive as
// gRPC sends its status message: grpc-message is UTF-8, percent-encoded.
// A hop that forgets to decode it passes
// "Developer%20instruction%20is%20not..." on. It may also arrive
// form-encoded ("This+model%27s+maximum+context+length"). A message with
// a space in it is already text and is returned as it is. So is one that
// does not decode.
func plainText(s string) string {
	if strings.IndexByte(s, ' ') >= 0 || !strings.ContainsAny(s, "%+") {
		return s
	}
	if t, err := url.QueryUnescape(s); err == nil {
		return t
	}
	return s
}
