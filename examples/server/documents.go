package main

// behaviour is what the built-in fake upstream does with a document, chosen
// so that the demo shows every path through the gate.
type behaviour string

const (
	// behaveOK: the model answers at once.
	behaveOK behaviour = "ok"
	// behaveRateLimited: odd calls get a 429 with retry-after-ms, tagged as
	// concerning this document only; the job cools down for the hint.
	behaveRateLimited behaviour = "rate_limited"
	// behaveOverloaded: odd calls get a 503 without a hint, tagged as
	// concerning this document only; the job cools down for the gate's
	// backoff.
	behaveOverloaded behaviour = "overloaded"
	// behaveTooLong: 400 context_length_exceeded, a permanent failure.
	behaveTooLong behaviour = "context_too_long"
	// behaveBadOutput: the model ignores the JSON format every time; the app
	// marks it transient and MaxAttempts marks the job failed.
	behaveBadOutput behaviour = "bad_output"
	// behaveSlow: the call outlives one lease, so the lease is renewed.
	behaveSlow behaviour = "slow"
	// behaveProviderLimit: odd calls get a provider-wide 429: the key the
	// call ran on cools down; jobs move to the other key, or every job
	// waits when none is left.
	behaveProviderLimit behaviour = "provider_rate_limited"
	// behaveNoCredit: odd calls get Anthropic's "credit balance is too
	// low" 400: a billing problem of the whole key the call ran on, not of
	// the document. That upstream pauses until the credits are back (the
	// next call, here) or an operator resets it; the job is never marked
	// failed.
	behaveNoCredit behaviour = "credit_balance_too_low"
)

// document is one item the user can ask the model to evaluate.
type document struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Scenario says, for the demo page, what the fake upstream does.
	Scenario  string    `json:"scenario"`
	Behaviour behaviour `json:"behaviour"`
	Text      string    `json:"-"`
	// Summary is what the fake model answers for the document.
	Summary string `json:"-"`
	Risk    string `json:"-"`
}

// catalog is the demo's fixed list of documents, in page order.
var catalog = []document{
	{
		ID: "welcome-letter", Title: "Welcome letter", Behaviour: behaveOK,
		Scenario: "The model answers right away.",
		Text:     "Dear customer, welcome aboard. Your account is active and your first invoice is due in 30 days.",
		Summary:  "A friendly welcome; the first invoice is due in 30 days.", Risk: "low",
	},
	{
		ID: "supplier-contract", Title: "Supplier contract", Behaviour: behaveRateLimited,
		Scenario: "Rate-limited for this document: the API asks to wait (retry-after-ms).",
		Text:     "The supplier shall deliver 400 units monthly. Either party may terminate with 90 days' notice. Late delivery incurs a 2% penalty per week.",
		Summary:  "Monthly delivery of 400 units, 90-day termination, 2%/week late penalty.", Risk: "medium",
	},
	{
		ID: "incident-report", Title: "Incident report", Behaviour: behaveOverloaded,
		Scenario: "The model is overloaded (503, no hint): the gate backs off.",
		Text:     "On 3 March the payment service was unavailable for 47 minutes after a certificate expired. No data was lost.",
		Summary:  "47-minute payment outage from an expired certificate; no data lost.", Risk: "medium",
	},
	{
		ID: "patient-history", Title: "Patient history (1,200 pages)", Behaviour: behaveTooLong,
		Scenario: "Too long for the model: retrying cannot help.",
		Text:     "[1,200 pages of scanned notes]",
	},
	{
		ID: "survey-answers", Title: "Survey answers", Behaviour: behaveBadOutput,
		Scenario: "The model ignores the required JSON format, every time.",
		Text:     "Q1: How likely are you to recommend us? A: 9. Q2: What should we improve? A: Faster support replies.",
	},
	{
		ID: "annual-filing", Title: "Annual filing", Behaviour: behaveSlow,
		Scenario: "A slow call that outlives one lease: the gate renews it.",
		Text:     "Revenue grew 12% to 84 million; operating margin fell from 18% to 15% on higher cloud costs.",
		Summary:  "Revenue +12% to 84M; margin down to 15% on cloud costs.", Risk: "low",
	},
	{
		ID: "press-release", Title: "Press release", Behaviour: behaveProviderLimit,
		Scenario: "The provider rate-limits the whole API key it runs on: jobs move to the backup key, or wait when no key is left.",
		Text:     "Acme launches its new assistant today in 12 countries, with a free tier for students.",
		Summary:  "Acme's assistant launches in 12 countries with a free student tier.", Risk: "low",
	},
	{
		ID: "board-minutes", Title: "Board minutes", Behaviour: behaveNoCredit,
		Scenario: "The credit balance of the API key it runs on ran out: that key pauses, the job does not fail; jobs move to the backup key, or wait when no key is left.",
		Text:     "The board approved the 2027 budget and a new data-retention policy; the audit committee meets in May.",
		Summary:  "2027 budget and data-retention policy approved; audit committee meets in May.", Risk: "low",
	},
}

// findDocument returns the catalog entry with id.
func findDocument(id string) (document, bool) {
	for _, d := range catalog {
		if d.ID == id {
			return d, true
		}
	}
	return document{}, false
}
