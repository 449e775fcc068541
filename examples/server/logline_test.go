package main

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLogLineEscapesControls: the demo's log line (logError, through the
// logf run builds) carries a request's path and an error as text: CR, LF,
// ESC, NUL, DEL, a C1 control, a bidi override and a byte that is not
// UTF-8 come out escaped, one line per call, and printable text as it was.
func TestLogLineEscapesControls(t *testing.T) {
	var out strings.Builder
	a := &app{logf: logTo(&out)}
	r := httptest.NewRequest("POST", "/documents/x/evaluate", nil)
	r.URL.Path = "/documents/a\r\nerror: forged\x1b[31mred\x00\x7f\u0085\u202eb\xff/evaluate"
	a.logError(r, errors.New("upstream said \x1b]0;title\x07 café"))
	got := out.String()
	exp := `error: POST /documents/a\r\nerror: forged\x1b[31mred\x00\x7f\u0085\u202eb\xff/evaluate: upstream said \x1b]0;title\a café` + "\n"
	if got != exp {
		t.Errorf("log line:\n got %q\nexp %q", got, exp)
	}
	for i, c := range []byte(strings.TrimSuffix(got, "\n")) {
		if c < 0x20 || c == 0x7f {
			t.Fatalf("raw control byte %#x at %d in %q", c, i, got)
		}
	}
}
