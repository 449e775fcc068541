package main

import "testing"

// The row reads the metrics the line's benchmark reports, and refuses
// output without them.
func TestParseLine(t *testing.T) {
	// The form `go test -bench` prints (one iteration, custom metrics).
	out := "goos: linux\nBenchmarkHundredThousandWaiting-2   \t       1\t9000000000 ns/op\t       312.5 B/waiting(used_memory)\t       290.1 B/waiting(MEMORY_USAGE)\t         1.040 roundtrips/admitted\t   3500000 ns/renewal\nPASS\n"
	r, err := parseLine(out)
	if err != nil {
		t.Fatal(err)
	}
	if exp := (lineRow{usedMemory: 312.5, memoryUsage: 290.1, trips: 1.04, renewal: 3.5e6}); *r != exp {
		t.Fatalf("parsed %+v, want %+v", *r, exp)
	}
	if _, err := parseLine("BenchmarkHundredThousandWaiting-2 1 9000 ns/op 312.5 B/waiting(used_memory)\n"); err == nil {
		t.Fatal("a result without the round trips parsed")
	}
	if _, err := parseLine("FAIL\n"); err == nil {
		t.Fatal("output without a result parsed")
	}
}
