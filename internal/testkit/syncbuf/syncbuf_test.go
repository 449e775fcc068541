package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers in goroutines and a reader at once (under -race): every write is
// kept whole.
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := b.Write([]byte("ab\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if exp, got := strings.Repeat("ab\n", 800), b.String(); got != exp {
		t.Fatalf("got %d bytes, want 800 writes of %q whole", len(got), "ab\n")
	}
}
