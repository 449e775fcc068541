package main

import (
	"context"
	"strings"
	"testing"
)

func TestRunWithoutAnAPIKey(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if exp, got := "A supplier contract: 400 units a month, 90 days' notice.\n", out.String(); exp != got {
		t.Fatalf("output %q, want %q", got, exp)
	}
}
