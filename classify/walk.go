package classify

// maxWalk bounds how many errors one classification inspects. Real chains
// are a handful deep. The bound turns a cyclic Unwrap, on which errors.Is
// and errors.As loop forever, into a fixed cost. It does so for a
// 100k-deep chain too. Signals deeper than the bound are ignored.
const maxWalk = 1024

// walk calls visit for err and every error it wraps. It goes depth first
// and outermost first, the order errors.Is uses. It stops when visit
// returns true or maxWalk errors were seen. It never calls errors.Is or
// errors.As, which have no cycle guard.
//
// Methods of foreign error types (Unwrap, Timeout, HTTPStatusCode...) may
// panic, for instance on a typed nil pointer. walk recovers and keeps what
// visit collected so far. A classifier that panics would take the
// caller's worker down with it.
func walk(err error, visit func(error) bool) {
	defer func() { _ = recover() }()
	stack := []error{err}
	for seen := 0; len(stack) > 0 && seen < maxWalk; seen++ {
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e == nil {
			continue
		}
		if visit(e) {
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				stack = append(stack, w)
			}
		case interface{ Unwrap() []error }:
			ws := u.Unwrap()
			for i := len(ws) - 1; i >= 0 && len(stack) < maxWalk; i-- {
				if ws[i] != nil {
					stack = append(stack, ws[i])
				}
			}
		}
	}
}

// is reports whether e itself (not its chain) is target, honouring an Is
// method as errors.Is does.
func is(e, target error) bool {
	if e == target {
		return true
	}
	x, ok := e.(interface{ Is(error) bool })
	return ok && x.Is(target)
}
