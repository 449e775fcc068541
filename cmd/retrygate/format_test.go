package main

import (
	"testing"
	"time"
)

func TestFmtDur(t *testing.T) {
	for _, tc := range []struct {
		in  time.Duration
		exp string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{1234 * time.Millisecond, "1.2s"},
		{59*time.Second + 600*time.Millisecond, "1m0s"},
		{9*time.Minute + 59*time.Second + 400*time.Millisecond, "9m59s"},
		{9*time.Minute + 59*time.Second + 600*time.Millisecond, "10m"}, // rounds into minutes
		{59*time.Minute + 59*time.Second, "1h0m"},
		{25 * time.Hour, "25h0m"},
		{7*24*time.Hour - time.Second, "7d0h"},
	} {
		if got := fmtDur(tc.in); tc.exp != got {
			t.Errorf("fmtDur(%v): exp %q, got %q", tc.in, tc.exp, got)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, exp string }{
		{"doc-1", "doc-1"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"", "''"},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
	} {
		if got := shellQuote(tc.in); tc.exp != got {
			t.Errorf("shellQuote(%q): exp %s, got %s", tc.in, tc.exp, got)
		}
	}
}
