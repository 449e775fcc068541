package upstream

import (
	"context"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// An operator's switch on one upstream is a pause and its early end.
// Every process obeys the pause at its next acquire. It ends by itself.

// guardedNamed returns the upstream named name. It returns false when
// the set has none of that name.
func (s *Set) guardedNamed(name string) (*guarded, bool) {
	for _, b := range s.all {
		if g, ok := b.(*guarded); ok && g.name == name {
			return g, true
		}
	}
	return nil, false
}

// Pause pauses the upstream named name for p.TTL, whatever it held. It
// returns its status after, in one round trip. ok is false when the set
// has no upstream of that name; then nothing is sent.
func (s *Set) Pause(ctx context.Context, st *store.Store, name string, p store.Pause) (_ Status, ok bool, err error) {
	b, ok := s.guardedNamed(name)
	if !ok {
		return Status{}, false, nil
	}
	t := st.Trip()
	r := t.PauseUpstream(ctx, b.k, p)
	t.Send(ctx)
	v, err := r.Result()
	if err != nil {
		return Status{}, true, err
	}
	status := refusal(name, v, p.TTL)
	b.remember(status)
	return status, true, nil
}

// Resume ends an operator's pause (its reason code reason) of the upstream
// named name, and nothing else. It costs one round trip. ended reports
// whether there was one. ok is false when the set has no upstream of that
// name.
func (s *Set) Resume(ctx context.Context, st *store.Store, name, reason string) (ended, ok bool, err error) {
	b, ok := s.guardedNamed(name)
	if !ok {
		return false, false, nil
	}
	t := st.Trip()
	r := t.ResumeUpstream(ctx, b.k, reason)
	t.Send(ctx)
	if ended, err = r.Result(); err != nil {
		return false, true, err
	}
	b.forget()
	return ended, true, nil
}
