// Package integration holds end-to-end tests: a real PostgreSQL, pgtables'
// real HTTP server on a loopback port, and the real Azure SDK clients
// (aztables) and raw HTTP driving it. It has no non-test code.
package integration
