// Package release is the repository's release tooling: it finds the
// modules of the repository, sets their requirements of each other to one
// version and tags them (make release), lays them into a module proxy as a
// user's go command would see them (the proxy test), and lists each
// module's exported API (the API check, make api).
//
// It is its own module, so golang.org/x/mod is a requirement of no module
// a user imports, and it imports none of them: it reads them as files and
// through the go command.
//
// Development inside the repository needs no release: every nested module
// requires the others at the last released version and replaces them with
// the working tree (replace => ../..). A replace in a dependency's go.mod
// is ignored by the go command, so a user of gate/gateasynq@v0.2.0 gets
// github.com/retrygate/retrygate@v0.2.0, the version Release wrote beside
// the replace. A go.work would do the same for development, but it merges
// every module's requirements into one build list, so the root module
// would be tested against the newest dependencies any adapter or example
// asks for rather than its own go.mod, and go mod tidy ignores it.
package release
