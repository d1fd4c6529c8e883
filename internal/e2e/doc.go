// Package e2e holds the end-to-end tests that need several parts of the
// platform at once over real HTTP (the control plane, the tool runner, a
// provider emulator, NATS and both audit stores), which no single package's
// tests can import without a cycle. It has no code of its own.
package e2e
