package tenanttest

import (
	"strconv"
	"sync"
	"testing"
)

// NewSet builds a package's tenant label set: of maps a tenant to its
// label (nil: no tenant label), max bounds the distinct labels (0 or less:
// the default, 100). The func returned gives a tenant's label value.
type NewSet func(of func(tenant string) string, max int) func(tenant string) string

// Bound checks newSet's sets against the documented bound, other being the
// package's value for a tenant past it.
func Bound(t *testing.T, newSet NewSet, other string) {
	t.Helper()
	same := func(tenant string) string { return tenant }

	t.Run("off without a mapping", func(t *testing.T) {
		label := newSet(nil, 2)
		for _, tenant := range []string{"acme", "", "bad\xff"} {
			if got := label(tenant); got != "" {
				t.Errorf("tenant %q without TenantLabel: exp \"\", got %q", tenant, got)
			}
		}
	})

	t.Run("a tenant mapped to nothing", func(t *testing.T) {
		label := newSet(func(tenant string) string {
			if tenant == "acme" {
				return ""
			}
			return tenant
		}, 1)
		if got := label("acme"); got != "" {
			t.Errorf("exp \"\", got %q", got)
		}
		// It took no place: the next value still has one.
		if exp, got := "globex", label("globex"); exp != got {
			t.Errorf("exp %q, got %q", exp, got)
		}
	})

	t.Run("at most max values, then other", func(t *testing.T) {
		label := newSet(func(tenant string) string { return "plan-" + tenant }, 2)
		for _, c := range []struct{ tenant, exp string }{
			{"a", "plan-a"},
			{"b", "plan-b"},
			{"c", other},
			{"a", "plan-a"}, // a value already kept stays past the bound
			{"b", "plan-b"},
			{"d", other},
		} {
			if got := label(c.tenant); got != c.exp {
				t.Errorf("tenant %q: exp %q, got %q", c.tenant, c.exp, got)
			}
		}
	})

	t.Run("a value not UTF-8 is other and takes no place", func(t *testing.T) {
		label := newSet(same, 1)
		if got := label("bad\xff"); got != other {
			t.Errorf("exp %q, got %q", other, got)
		}
		if exp, got := "acme", label("acme"); exp != got {
			t.Errorf("after a value not UTF-8: exp %q, got %q", exp, got)
		}
	})

	for _, max := range []int{0, -1} {
		t.Run("default bound of 100, max "+strconv.Itoa(max), func(t *testing.T) {
			label := newSet(same, max)
			for i := range 100 {
				tenant := "t" + strconv.Itoa(i)
				if got := label(tenant); got != tenant {
					t.Fatalf("value %d of 100: exp %q, got %q", i+1, tenant, got)
				}
			}
			if got := label("t100"); got != other {
				t.Errorf("the 101st value: exp %q, got %q", other, got)
			}
		})
	}

	// Callers observe from many goroutines: the bound holds however their
	// calls interleave, and a value once kept is always kept.
	t.Run("concurrent calls", func(t *testing.T) {
		const max, goroutines, values = 8, 16, 64
		label := newSet(same, max)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			kept  = map[string]bool{}
			start = make(chan struct{})
		)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range values {
					// Each goroutine walks the values from its own place.
					tenant := "t" + strconv.Itoa((i+g*values/goroutines)%values)
					if v := label(tenant); v != other {
						if v != tenant {
							t.Errorf("tenant %q labelled %q", tenant, v)
						}
						mu.Lock()
						kept[v] = true
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(kept) != max {
			t.Fatalf("%d distinct values kept, exp %d: %v", len(kept), max, kept)
		}
		for v := range kept {
			if got := label(v); got != v {
				t.Errorf("a kept value %q now labelled %q", v, got)
			}
		}
	})
}
