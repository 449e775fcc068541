package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// fmtDur prints a duration for people: tenths of a second under 10 s,
// seconds under 10 min, minutes under 48 h, hours above. Exact values are
// in the --json output.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	d = d.Round(time.Second)
	if d < 10*time.Minute {
		return d.String()
	}
	d = d.Round(time.Minute)
	if d < 48*time.Hour {
		return strings.TrimSuffix(d.String(), "0s")
	}
	h := int64(d.Round(time.Hour) / time.Hour)
	return fmt.Sprintf("%dd%dh", h/24, h%24)
}

// at is the wall-clock time d from now, in UTC to the second.
func at(d time.Duration) string {
	return time.Now().Add(d).UTC().Truncate(time.Second).Format(time.RFC3339)
}

// table writes aligned columns.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one tab-separated row.
func row(tw *tabwriter.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprintln(tw)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// shellQuote quotes s for a POSIX shell when it needs it, so printed
// commands can be pasted.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printable makes a name (a job, an upstream, a reason: any bytes, from URLs
// and from Redis) safe to show on a terminal: the name as is when Go would
// quote it unchanged, else its Go string literal ("doc\x00\r\n"), which
// parseName reads back. Every name the CLI prints goes through it.
func printable(s string) string {
	q := strconv.Quote(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}

// argQuote is a name as a shell argument in a printed command: printable,
// then quoted for the shell, so the command can be pasted as is.
func argQuote(s string) string { return shellQuote(printable(s)) }

// jobQuote is a JOB as the last argument of a printed command: argQuote,
// after "--" when it starts with '-' (a job "-1" or "-h" is not a flag).
func jobQuote(job string) string {
	if strings.HasPrefix(printable(job), "-") {
		return "-- " + argQuote(job)
	}
	return argQuote(job)
}

// quoted is printable(s) when it differs from s, for --json: a JSON string
// cannot carry bytes that are not UTF-8.
func quoted(s string) string {
	if p := printable(s); p != s {
		return p
	}
	return ""
}

// safeLine makes a message one line safe for a terminal: runs of white
// space become one space, and other control characters and bytes that are
// not UTF-8 are escaped as in a Go string. Every error line goes through
// it, whatever its pieces (a server's reply, a library's error).
func safeLine(s string) string {
	var b strings.Builder
	for _, f := range strings.Fields(s) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		for len(f) > 0 {
			r, n := utf8.DecodeRuneInString(f)
			switch {
			case r == utf8.RuneError && n == 1:
				fmt.Fprintf(&b, `\x%02x`, f[0])
			case !unicode.IsPrint(r):
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
			default:
				b.WriteString(f[:n])
			}
			f = f[n:]
		}
	}
	return b.String()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
