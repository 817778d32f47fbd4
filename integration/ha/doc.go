// Package ha holds end-to-end tests of pgtables on highly available and
// restored PostgreSQL: a pg_auto_failover formation whose primary is
// killed or switched over under load, and a pgBackRest point-in-time
// recovery. They start their own PostgreSQL servers on loopback ports
// 9790-9799 with Debian's postgresql-15-auto-failover and pgbackrest, as
// an unprivileged user when run as root. It has no non-test code.
package ha
