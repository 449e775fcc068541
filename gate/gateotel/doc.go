// Package gateotel reports a gate's events to OpenTelemetry: spans under
// the caller's span that show why a call ran, waited, was refused or
// cooled and until when, and the same metrics gate/gateprom exports, as
// OpenTelemetry instruments.
//
//	obs, err := gateotel.New(gateotel.Options{})
//	g, err := gate.New(rdb, gate.Options{Upstream: "openai:prod", Observer: obs})
//
// # Spans
//
// The gate reports what happened, as points in time (gate.Event), not
// operations with a start; the spans are built from them honestly:
//
//	retrygate.acquire  an acquire's outcome: ran, refused (status Error,
//	                   with the refusing state, reason, wait and retry_at),
//	                   or ran ungated. Zero length: the event carries no
//	                   start, so the round trip's own time is not known.
//	retrygate.call     the guarded call: from the lease's start to its
//	                   settle (the event's Held), status Error when it
//	                   failed, or when the lease was lost while it ran.
//	retrygate.settle   child of retrygate.call, zero length at its end:
//	                   what the settle recorded (state, outcome, class,
//	                   reason, the cooldown and when it ends).
//
// Everything else is a span event on the caller's span: a failed renewal,
// a lease lost, a Redis error (operation and cause), fail-open, the
// upstream cooling or paused (reason, wait, retry_at), a warning.
// A wait for a running job (gate.Options.Wait, AcquireWait) shows as the
// running refusal's retrygate.acquire span followed by the one that ran,
// the gap between them being the wait: the gate reports no wait of its own.
//
// Spans are recorded only under a recording span of the caller (ctx
// passed to Do, Call or Acquire): the gate never starts a trace of its
// own, so a retry storm outside any trace costs no spans, and a call with
// no tracer configured allocates nothing (TestNoAllocationWithoutTracer).
//
// Attributes are retrygate.job, retrygate.upstream, retrygate.state,
// retrygate.outcome, retrygate.reason, retrygate.class, retrygate.fence,
// retrygate.attempt, retrygate.wait and retrygate.held (seconds),
// retrygate.retry_at (RFC 3339), retrygate.local, retrygate.op,
// retrygate.cause, and on an acquire's span what the upstream's budget had
// left (retrygate.budget.requests_left, retrygate.budget.tokens_left) and
// whether it refused the call (retrygate.budget.spent), where they apply; error.type (the reason code, else the
// refusing state) on refusals and failures; gen_ai.provider.name when the
// upstream's first segment names a provider the GenAI semantic conventions
// list ("openai:prod-key" gives openai; gemini, vertex, azure, bedrock,
// mistral and xai are read as gcp.gemini, gcp.vertex_ai, azure.ai.openai,
// aws.bedrock, mistral_ai and x_ai). Error text, which may be upstream
// text, is never an attribute: reasons are codes.
//
// # Metrics
//
// The instruments are gateprom's metrics under names that the
// OpenTelemetry Prometheus exporter turns into gateprom's own
// (retrygate.acquisitions → retrygate_acquisitions_total,
// retrygate.lock_held in seconds → retrygate_lock_held_seconds), with the
// same attribute names (upstream, outcome, state, reason, op, cause, kind,
// limit),
// so dashboards and the sample alerts work on either; see gateprom's doc
// for each one. TestSameSeriesAsGateprom feeds both the same events. The
// job key is never a metric attribute (unbounded); reason codes outside
// the known set and Options.Reasons read "other".
//
// An *Observer is safe for concurrent use and may be shared by gates;
// create it with New.
package gateotel
