// Command queue summarises documents with go-openai as queued jobs under
// the gate, on hibiken/asynq (Redis) or riverqueue/river (PostgreSQL): a
// rate-limited job comes back at the provider's hint without burning its
// retries, a document the model cannot take is archived or cancelled with
// the reason, a document submitted twice is summarised once.
//
//	REDIS_URL=redis://localhost:6379 OPENAI_API_KEY=sk-... go run . -queue asynq doc-1 doc-2
//	DATABASE_URL=postgres://localhost/app REDIS_URL=... OPENAI_API_KEY=... go run . -queue river doc-1
//
// It enqueues the documents named on the command line, then works the
// queue until interrupted, printing a line per document: its summary, why
// it will not be retried, or that it was summarised before and completes
// without a model call (report.go, the gate's Observer). OPENAI_BASE_URL points it at any
// OpenAI-compatible server. The README's "In a job queue" comes from
// asynqServer, riverClient and summarise; queue_test.go runs them on a
// real redis-server and PostgreSQL against a local model that answers the
// first call 429.
//
// Its own module, so the library's go.mod gets no queue dependency.
package main
