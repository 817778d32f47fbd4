package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Stored access policies (the table ACL) are rows of table_acls keyed by
// the table's id. Every statement resolves the id through the live name,
// so a deleted table's policies are unreachable at once and a new table of
// the same name starts with none; the rows go with the table's row when
// the purger drops it.
const (
	// Locks the live table row against a concurrent Set ACL (and Delete
	// Table) for the rest of the transaction.
	sqlLockLiveTable = `
SELECT id FROM tables WHERE account = $1 AND lname = $2 AND deleted_at IS NULL
FOR NO KEY UPDATE`

	sqlClearACL = `DELETE FROM table_acls WHERE table_id = $1`

	sqlInsertACL = `
INSERT INTO table_acls (table_id, policy_id, pos, start_at, expiry_at, permission)
SELECT $1, u.policy_id, u.pos, u.start_at, u.expiry_at, u.permission
FROM unnest($2::text[], $3::smallint[], $4::bigint[], $5::bigint[], $6::text[])
    AS u(policy_id, pos, start_at, expiry_at, permission)`

	// One round trip tells a missing table from an empty ACL.
	sqlGetACL = `
SELECT a.policy_id, a.start_at, a.expiry_at, a.permission
FROM tables t LEFT JOIN table_acls a ON a.table_id = t.id
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL
ORDER BY a.pos`

	sqlGetPolicy = `
SELECT a.start_at, a.expiry_at, a.permission
FROM tables t JOIN table_acls a ON a.table_id = t.id
WHERE t.account = $1 AND t.lname = $2 AND t.deleted_at IS NULL AND a.policy_id = $3`
)

// MaxAccessPolicies is how many stored access policies a table may have.
const MaxAccessPolicies = 5

// AccessPolicy is one stored access policy (a SignedIdentifier). Each of
// Start, Expiry and Permission may be unset; a SAS that names the policy
// must then carry the field itself.
type AccessPolicy struct {
	ID         string
	Start      *int64  // ticks
	Expiry     *int64  // ticks
	Permission *string // letters from "raud", in that order
}

// ErrPolicyNotFound means a table has no stored access policy of that id.
var ErrPolicyNotFound = errors.New("access policy not found")

// SetACL replaces the stored access policies of a table. The caller
// validates them (at most MaxAccessPolicies, distinct ids).
func (s *Store) SetACL(ctx context.Context, account, table string, policies []AccessPolicy) error {
	ids := make([]string, len(policies))
	pos := make([]int16, len(policies))
	starts := make([]*int64, len(policies))
	expiries := make([]*int64, len(policies))
	perms := make([]*string, len(policies))
	for i, p := range policies {
		ids[i], pos[i], starts[i], expiries[i], perms[i] = p.ID, int16(i), p.Start, p.Expiry, p.Permission
	}
	err := s.inConflictRetry(ctx, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, sqlLockLiveTable, account, tableKey(table)).Scan(&id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrTableNotFound
			}
			return err
		}
		if _, err := tx.Exec(ctx, sqlClearACL, id); err != nil {
			return err
		}
		if len(policies) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, sqlInsertACL, id, ids, pos, starts, expiries, perms)
		return err
	})
	if err != nil && !errors.Is(err, ErrTableNotFound) {
		return classify(fmt.Errorf("set acl: %w", err))
	}
	return err
}

// GetACL returns the stored access policies of a table in the order they
// were set.
func (s *Store) GetACL(ctx context.Context, account, table string) ([]AccessPolicy, error) {
	rows, err := s.pool.Query(ctx, sqlGetACL, account, tableKey(table))
	if err != nil {
		return nil, classify(fmt.Errorf("get acl: %w", err))
	}
	found := false
	policies := []AccessPolicy{}
	var (
		id     *string
		start  *int64
		expiry *int64
		perm   *string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &start, &expiry, &perm}, func() error {
		found = true
		if id != nil { // the LEFT JOIN's row for a table without policies
			// pgx may reuse the pointed-to values between rows: copy them.
			policies = append(policies, AccessPolicy{ID: *id, Start: clone(start), Expiry: clone(expiry), Permission: clone(perm)})
		}
		return nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("get acl: %w", err))
	}
	if !found {
		return nil, ErrTableNotFound
	}
	return policies, nil
}

// AccessPolicy returns the stored access policy id of a live table, or
// ErrPolicyNotFound (also when the table does not exist). It reads the
// database every time: a changed or removed policy takes effect at once,
// on every replica.
func (s *Store) AccessPolicy(ctx context.Context, account, table, id string) (*AccessPolicy, error) {
	p := &AccessPolicy{ID: id}
	err := s.pool.QueryRow(ctx, sqlGetPolicy, account, tableKey(table), id).Scan(&p.Start, &p.Expiry, &p.Permission)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrPolicyNotFound
	}
	if err != nil {
		return nil, classify(fmt.Errorf("get access policy: %w", err))
	}
	return p, nil
}

// clone returns a pointer to a copy of *p, or nil.
func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
