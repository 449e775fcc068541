package classify

// Reasons returns every reason code this package's verdicts carry (the
// Reason constants). They come in their declaration order, as a new
// slice. A metrics observer keeps these as label values. It folds any
// other code into one. So a custom classifier cannot grow a label set
// without bound.
func Reasons() []string {
	return []string{
		ReasonRateLimited, ReasonQuotaExhausted, ReasonAccount, ReasonOverloaded,
		ReasonContextLength, ReasonContentFiltered, ReasonInvalidRequest, ReasonAuth,
		ReasonModelNotFound, ReasonNotImplemented, ReasonUpstream5xx, ReasonUpstreamStatus,
		ReasonTimeout, ReasonNetwork, ReasonTLS, ReasonBadOutput, ReasonCanceled, ReasonPanic,
		ReasonUnknown, ReasonMarkedPermanent, ReasonMarkedTransient, ReasonMarkedSystemic,
		ReasonShouldNotRetry, ReasonShouldRetry, ReasonClientSide, ReasonTooLarge,
		ReasonInvalidURL, ReasonBadStream,
	}
}
