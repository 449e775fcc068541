package main

import (
	"testing"
	"time"
)

func TestHistQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q   float64
		exp time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(tc.q)
		if diff := float64(got-tc.exp) / float64(tc.exp); diff < -0.02 || diff > 0.02 {
			t.Errorf("quantile(%v): exp %v ± 2%%, got %v", tc.q, tc.exp, got)
		}
	}
}

func TestHistIndexMonotonic(t *testing.T) {
	last := -1
	for ns := uint64(0); ns < 1<<20; ns += 7 {
		i := histIndex(ns)
		if i < last || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d after %d", ns, i, last)
		}
		last = i
	}
	if i := histIndex(^uint64(0)); i >= histBuckets {
		t.Fatalf("histIndex(max) = %d, beyond %d buckets", i, histBuckets)
	}
}
