// Package floors holds the test that keeps the repository's packages on
// their floors: a package imports only from its own floor or those below
// it. The ground libraries (internal/keyspace, persistence, …) sit at the
// bottom; the test harness (internal/testkit) sits at the top, above gate
// and classify, which its packages import and which import nothing of it.
package floors
