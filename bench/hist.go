package main

import (
	"math/bits"
	"time"
)

// hist is a latency histogram with 64 sub-buckets per power of two of
// nanoseconds (under 1.6% error), fixed in size so that recording a
// latency allocates nothing inside the measured loop.
type hist struct{ counts [histBuckets]uint64 }

const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = histSub * (64 - histSubBits + 1)
)

func histIndex(ns uint64) int {
	if ns < histSub {
		return int(ns)
	}
	shift := bits.Len64(ns) - histSubBits - 1
	return histSub*shift + int(ns>>shift)
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < histSub {
		return time.Duration(i)
	}
	shift := i/histSub - 1
	lower := uint64(i-histSub*shift) << shift
	return time.Duration(lower + (uint64(1)<<shift)/2)
}

func (h *hist) add(d time.Duration) { h.counts[histIndex(uint64(max(d, 0)))]++ }

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

func (h *hist) reset() { h.counts = [histBuckets]uint64{} }

// quantile returns the latency below which a fraction q of samples lie.
func (h *hist) quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h.counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return histValue(i)
		}
	}
	return histValue(histBuckets - 1)
}
