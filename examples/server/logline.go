package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// logTo returns the demo's logf: one line per call on w, prefixed
// "error: ", with what a client controls (a path, an id inside an error)
// unable to start a line of its own or recolour a terminal. Copy it with
// the handlers: a log line is as exposed as a response.
func logTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintln(w, "error: "+escapeControls(fmt.Sprintf(format, args...)))
	}
}

// escapeControls writes every rune that is not graphic (CR, LF, ESC, NUL,
// DEL, the C1 controls, bidi and other format characters) and every byte
// that is not UTF-8 as a Go escape (\r, \x1b, \u202e), so the line reads
// as it was and holds nothing a terminal or log parser acts on.
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if r != ' ' && !unicode.IsGraphic(r) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == ' ' || unicode.IsGraphic(r) && r != utf8.RuneError:
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\r', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}
