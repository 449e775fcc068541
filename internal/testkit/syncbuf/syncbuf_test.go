package syncbuf

import (
	"strings"
	"testing"
)

// Writers in goroutines and a reader at once (under -race): every write is
// kept whole.
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	done := make(chan error, 8)
	for range cap(done) {
		go func() {
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				_, err = b.Write([]byte("ab\n"))
				_ = b.String()
			}
			done <- err
		}()
	}
	for range cap(done) {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if exp, got := strings.Repeat("ab\n", 800), b.String(); got != exp {
		t.Fatalf("got %d bytes, want 800 writes of %q whole", len(got), "ab\n")
	}
}
