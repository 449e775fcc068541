package classify

import (
	"net/url"
	"strings"
)

// plainText undoes the percent-encoding of a message that arrives as gRPC
// sends its status message (grpc-message is UTF-8, percent-encoded; a hop
// that forgets to decode it passes "Developer%20instruction%20is%20not..."
// on) or form-encoded ("This+model%27s+maximum+context+length"). A message
// with a space in it is already text and is returned as it is, so is one
// that does not decode.
func plainText(s string) string {
	if strings.IndexByte(s, ' ') >= 0 || !strings.ContainsAny(s, "%+") {
		return s
	}
	if t, err := url.QueryUnescape(s); err == nil {
		return t
	}
	return s
}
