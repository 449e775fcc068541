package upstream

import (
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// Status is an upstream's state read at a moment.
type Status struct {
	Name string
	// Mode is store.ModeReady, store.ModeCooling or store.ModePaused. A
	// probe reads as the wait it ends (Probing). A foreign value reads as
	// its letter says.
	Mode store.Mode
	// RetryAfter is the time left in the cooldown or pause. While one
	// call probes (Probing), it is the probe's lease left.
	RetryAfter time.Duration
	Reason     string
	// Note is an operator's words for a pause they set (Set.Pause).
	Note    string
	Probing bool
	// Budget: the upstream is ready but its budget refused the call.
	// RetryAfter is when the estimate fits it. It is 0 when only a call
	// in flight settling can tell.
	Budget bool
	// Gap is, in a budget's refusal, the time one call's request refills
	// (0: not known). Its line gives turns at that rate.
	Gap time.Duration
	// Limits is the upstream's budget as an operator's read estimates it
	// now (Set.Read). It is zero elsewhere.
	Limits store.BudgetRead
}

// Refusing reports whether the upstream refuses calls.
func (s Status) Refusing() bool { return s.Mode != store.ModeReady || s.Probing || s.Budget }

// Permit is what a call may do with an upstream.
type Permit uint8

const (
	Permitted Permit = iota // ready: the call runs
	MayProbe                // the wait is over: the first call may claim the probe
	Refused                 // cooling, paused, probing, or foreign
)

// state is one of an upstream's states, decoded from its value. judge
// says, at Redis time now (ms), what a call may do and what it reads.
type state interface {
	judge(name string, now int64) (Permit, Status)
}

type (
	ready   struct{}
	cooling struct{ v store.Upstream }
	paused  struct{ v store.Upstream }
	probing struct{ v store.Upstream }
	foreign struct{ v store.Upstream } // not a value the gate wrote: an operator's SET
)

// stateOf is the state an upstream's value holds.
func stateOf(v store.Upstream) state {
	switch v.Mode {
	case store.ModeCooling:
		return cooling{v}
	case store.ModePaused:
		return paused{v}
	case store.ModeProbing:
		return probing{v}
	case store.ModeForeign:
		return foreign{v}
	}
	return ready{}
}

func (ready) judge(name string, _ int64) (Permit, Status) {
	return Permitted, Status{Name: name}
}

func (s cooling) judge(name string, now int64) (Permit, Status) {
	return waiting(name, store.ModeCooling, s.v, now)
}

func (s paused) judge(name string, now int64) (Permit, Status) {
	return waiting(name, store.ModePaused, s.v, now)
}

// waiting judges a cooldown or a pause. Calls are refused until it ends.
// Then the first call may probe; the claim checks again with Redis's
// clock.
func waiting(name string, st store.Mode, v store.Upstream, now int64) (Permit, Status) {
	wait := v.Wait(now)
	if wait <= 0 {
		return MayProbe, Status{Name: name}
	}
	return Refused, Status{Name: name, Mode: st, Reason: v.Reason, Note: v.Note, RetryAfter: wait}
}

func (s probing) judge(name string, now int64) (Permit, Status) {
	return Refused, Status{Name: name, Mode: store.ModeCooling, Reason: s.v.Reason, Probing: true,
		RetryAfter: max(s.v.Wait(now), time.Millisecond)}
}

// judge of a foreign value: never taken for ready, its end unknown. It
// is read as its letter says.
func (s foreign) judge(name string, _ int64) (Permit, Status) {
	st := Status{Name: name, Mode: store.ModeCooling, Reason: s.v.Reason}
	if s.v.Paused {
		st.Mode = store.ModePaused
	}
	return Refused, st
}

// refusal is an upstream's refusal read with its wait: a claim refused,
// or a trip's reply.
func refusal(name string, v store.Upstream, wait time.Duration) Status {
	st := Status{Name: name, Mode: store.ModeCooling, Reason: v.Reason, Note: v.Note, RetryAfter: max(wait, time.Millisecond)}
	switch {
	case v.Mode == store.ModePaused || v.Paused:
		st.Mode = store.ModePaused
	case v.Mode == store.ModeProbing:
		st.Probing = true
	}
	return st
}
