package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
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

// printable makes a job key safe to show on a terminal (it may hold any
// bytes).
func printable(s string) string {
	q := fmt.Sprintf("%q", s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
