package limitstorm

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Result is what a storm came to: how its jobs ended (Outcome, every
// process's together), and what the provider saw.
type Result struct {
	// Jobs is how many jobs arrived; each Completed, Failed (ErrFailed)
	// or was Lost: still not completed at the end of the drain, or told
	// to wait past it.
	Jobs int
	Outcome
	// Served and Refused are the provider's own count of the calls it
	// answered during the storm: 200s and 429s.
	Served, Refused int64
	// Bursts counts the storm's runs of 429s no more than 50 ms apart,
	// and LargestBurst is the longest; LargestAt is when it began, from
	// the start of the storm.
	Bursts, LargestBurst int
	LargestAt            time.Duration
	// Elapsed is from the start of the storm (the provider's buckets just
	// drained) to the last completion, or to the end of the drain when a
	// job was lost; Allowed and AllowedTokens are how many calls and
	// tokens the provider's limits allowed in it.
	Elapsed       time.Duration
	Allowed       float64
	AllowedTokens float64
	// Killed counts the jobs of a worker killed (Config.Faults), which
	// are not in Jobs.
	Killed int
	// Refill is the time the provider refills one call of its requests
	// limit: Window ÷ RPM.
	Refill time.Duration
}

// TripsPerJob is the Gates' Redis round trips per completed job.
func (r Result) TripsPerJob() float64 {
	if r.Completed == 0 {
		return 0
	}
	return float64(r.Trips) / float64(r.Completed)
}

// RefusedShare is the share of upstream calls that earned a 429.
func (r Result) RefusedShare() float64 {
	if r.Served+r.Refused == 0 {
		return 0
	}
	return float64(r.Refused) / float64(r.Served+r.Refused)
}

// Goodput is how much of the binding limit went to jobs while the storm
// lasted: the jobs completed ÷ the calls allowed, or their tokens ÷ the
// tokens allowed, whichever is higher. 1 is every call the provider would
// take, taken, and none wasted on a job run twice.
func (r Result) Goodput() float64 {
	var g float64
	if r.Allowed > 0 {
		g = float64(r.Completed) / r.Allowed
	}
	if r.AllowedTokens > 0 {
		g = max(g, float64(r.Tokens)/r.AllowedTokens)
	}
	return g
}

func (r Result) String() string {
	return fmt.Sprintf("%d jobs: %d completed, %d failed, %d lost, %d stale, %d errors; %d calls served, %d refused (%.1f %%, %d bursts, largest %d at %v); goodput %.2f (%d jobs of %.0f calls, %d of %.0f tokens allowed in %v); %.1f Redis round trips a job",
		r.Jobs, r.Completed, r.Failed, r.Lost, r.Stale, r.Errors, r.Served, r.Refused, 100*r.RefusedShare(),
		r.Bursts, r.LargestBurst, r.LargestAt.Round(time.Millisecond), r.Goodput(), r.Completed, r.Allowed, r.Tokens, r.AllowedTokens, r.Elapsed.Round(time.Millisecond), r.TripsPerJob())
}

// Waits is the time each completed job of part waited from its arrival
// to the start of the call that completed it, in increasing order.
func (r Result) Waits(part int) []time.Duration {
	var out []time.Duration
	for _, a := range r.Admissions {
		if a.Part == part {
			out = append(out, a.At-a.Arrived)
		}
	}
	slices.Sort(out)
	return out
}

// Quantile is the q-quantile of sorted ds (0 for none).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(int(math.Ceil(q*float64(len(ds))))-1, len(ds)-1)]
}

// Share is one part's admissions in one window, against its max-min fair
// share of the window's admissions among the parts with demand.
type Share struct {
	Window int // its index, from the storm's start
	Part   int
	Got    int
	Fair   float64
	Demand int
}

// Shares splits the storm into windows of window and, in each, gives each
// part with demand its admissions and its max-min fair share (equal
// weights) of all the window's admissions: a part's demand is its jobs
// admitted in the window, and those still waiting at its end that arrived
// at least lag before it.
func (r Result) Shares(window, lag time.Duration, parts int) []Share {
	var last time.Duration
	for _, a := range r.Admissions {
		last = max(last, a.At)
	}
	var out []Share
	for w := 0; time.Duration(w)*window <= last; w++ {
		start, end := time.Duration(w)*window, time.Duration(w+1)*window
		got, demand := make([]int, parts), make([]int, parts)
		total := 0
		for _, a := range r.Admissions {
			if a.At >= start && a.At < end {
				got[a.Part]++
				total++
			}
			if a.At >= start && (a.At < end || a.Arrived < end-lag) {
				demand[a.Part]++
			}
		}
		fair := maxMin(float64(total), demand)
		for p := range parts {
			if demand[p] > 0 {
				out = append(out, Share{Window: w, Part: p, Got: got[p], Fair: fair[p], Demand: demand[p]})
			}
		}
	}
	return out
}

// maxMin shares total among demands, max-min fairly with equal weights.
func maxMin(total float64, demand []int) []float64 {
	idx := make([]int, 0, len(demand))
	for i, d := range demand {
		if d > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(a, b int) int { return demand[a] - demand[b] })
	fair := make([]float64, len(demand))
	left := total
	for k, i := range idx {
		fair[i] = min(float64(demand[i]), left/float64(len(idx)-k))
		left -= fair[i]
	}
	return fair
}
