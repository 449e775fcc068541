package gateprom

import (
	"sync"
	"unicode/utf8"
)

// labelSet bounds the tenant label: Options.TenantLabel's values, at most
// max of them; any other is OtherLabel. gateotel, its own module, keeps
// a copy; tenanttest.Bound holds both to the same cases.
type labelSet struct {
	of  func(string) string
	max int

	mu   sync.RWMutex
	seen map[string]bool
}

func newLabelSet(of func(string) string, max int) *labelSet {
	if max <= 0 {
		max = 100
	}
	return &labelSet{of: of, max: max, seen: make(map[string]bool)}
}

// label is tenant's label value: "" without Options.TenantLabel.
func (s *labelSet) label(tenant string) string {
	if s.of == nil {
		return ""
	}
	v := s.of(tenant)
	if v == "" {
		return ""
	}
	if !utf8.ValidString(v) {
		return OtherLabel // a label value must be UTF-8: Prometheus would panic
	}
	s.mu.RLock()
	ok, n := s.seen[v], len(s.seen)
	s.mu.RUnlock()
	switch {
	case ok:
		return v
	case n >= s.max:
		return OtherLabel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) >= s.max && !s.seen[v] {
		return OtherLabel
	}
	s.seen[v] = true
	return v
}
