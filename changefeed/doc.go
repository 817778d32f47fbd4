// Package changefeed follows the change feed of a pgtables table
// (GET /-/accounts/{account}/tables/{table}/changes, README "Change feed"):
// it reads pages with long-polling, hands each transaction's changes to a
// handler, and saves the cursor after each through a Checkpoint, so that a
// follower that stops, crashes or loses its server resumes where it left
// off. Requests are signed and sent by package tableapi.
package changefeed
