// Package readme holds, in its test files, the Go fragments of README.md
// and of the guides under docs/ that need a function around them to
// compile: the things a user supplies (a context, a client, their own code)
// come as parameters or stubs (docs/testing.md's, a test function that
// must not run, is in testing.go). go test and go vet compile them; the root's
// TestREADMESnippets checks that each fragment here says what its Markdown
// file says. Nothing calls them.
//
// To change a fragment of the docs, change it here too, in the function
// named after its section.
package readme
