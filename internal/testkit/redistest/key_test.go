package redistest

import (
	"strings"
	"sync"
	"testing"
)

func TestUniqueKeyAndPrefix(t *testing.T) {
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				k, p := UniqueKey(t), Prefix(t)
				mu.Lock()
				if seen[k] || seen[p] {
					t.Errorf("duplicate key %q or prefix %q", k, p)
				}
				seen[k], seen[p] = true, true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	if k := UniqueKey(t); !strings.Contains(k, t.Name()) {
		t.Fatalf("UniqueKey %q does not name the test", k)
	}
	t.Run("a{b}c", func(t *testing.T) {
		p := Prefix(t)
		if exp, got := 1, strings.Count(p, "{"); exp != got || strings.Count(p, "}") != 1 {
			t.Fatalf("Prefix %q: exp exactly one hash tag", p)
		}
	})
}
