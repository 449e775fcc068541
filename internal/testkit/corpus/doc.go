// Package corpus loads the corpus of real provider error responses kept in
// classify/testdata/corpus: one JSON file per provider, each case a status,
// headers and body as the provider sent them, the verdict and retry hint
// classify.Default must give, and the source the case was taken from (an SDK
// test, a provider's documentation page or a public issue report).
//
// The expected verdicts were decided from what the provider says the
// response means, never from classify's output. The classify package and the
// gate-level tests at the repository root both replay the corpus: Load reads
// it, Case.ServeHTTP replays one case, and ReplayRule replays them all to
// an SDK's client and checks its rule (classify/sdk's TestCorpus).
//
// Load validates every case (source, status, known class, duration syntax,
// unique names) and returns one error naming each bad case. Cases are
// read-only values, safe for concurrent use.
package corpus
