// Package code checks the codes the gate writes and shows: classification
// reasons and evidence (package classify) travel through Redis to HTTP
// bodies, logs, metric labels and terminals, so each reader keeps only what
// a code can be. Shared by gate (what it writes) and httpmw (what it reads
// back). Internal.
package code
