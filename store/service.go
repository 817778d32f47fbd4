package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Service properties are one jsonb document per account: the JSON form of
// ServiceProperties. An account without a row has DefaultServiceProperties.
const (
	sqlGetServiceProperties = `SELECT props FROM service_properties WHERE account = $1`

	// CORS rules are read for every request that carries an Origin: one
	// primary-key lookup that returns only the rules.
	sqlGetCorsRules = `SELECT props->'Cors' FROM service_properties WHERE account = $1`

	sqlEnsureServiceProperties = `
INSERT INTO service_properties (account, props) VALUES ($1, $2)
ON CONFLICT (account) DO NOTHING`

	sqlLockServiceProperties = `SELECT props FROM service_properties WHERE account = $1 FOR UPDATE`

	sqlUpdateServiceProperties = `UPDATE service_properties SET props = $2 WHERE account = $1`
)

// ServiceProperties are the Table service properties of an account. Only
// Cors has an effect; the rest is stored and echoed.
type ServiceProperties struct {
	Logging       Logging
	HourMetrics   Metrics
	MinuteMetrics Metrics
	Cors          []CorsRule
}

// Logging is the analytics logging setting.
type Logging struct {
	Version             string
	Delete, Read, Write bool
	RetentionPolicy     RetentionPolicy
}

// Metrics is an hour or minute metrics setting. IncludeAPIs is meaningful
// only when Enabled.
type Metrics struct {
	Version         string
	Enabled         bool
	IncludeAPIs     bool
	RetentionPolicy RetentionPolicy
}

// RetentionPolicy says how long analytics data is kept. Days is meaningful
// only when Enabled.
type RetentionPolicy struct {
	Enabled bool
	Days    int
}

// CorsRule is one CORS rule. The lists are kept as the client wrote them
// (comma-separated), because that is what Get returns.
type CorsRule struct {
	AllowedOrigins  string
	AllowedMethods  string
	AllowedHeaders  string
	ExposedHeaders  string
	MaxAgeInSeconds int
}

// DefaultServiceProperties are the properties of an account that never set
// any: what a new Azure storage account reports.
func DefaultServiceProperties() ServiceProperties {
	return ServiceProperties{
		Logging:       Logging{Version: "1.0"},
		HourMetrics:   Metrics{Version: "1.0", Enabled: true, RetentionPolicy: RetentionPolicy{Enabled: true, Days: 7}},
		MinuteMetrics: Metrics{Version: "1.0"},
	}
}

// ServiceProperties returns the service properties of account.
func (s *Store) ServiceProperties(ctx context.Context, account string) (ServiceProperties, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, sqlGetServiceProperties, account).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return DefaultServiceProperties(), nil
	}
	if err != nil {
		return ServiceProperties{}, classify(fmt.Errorf("get service properties: %w", err))
	}
	var p ServiceProperties
	if err := json.Unmarshal(raw, &p); err != nil {
		return ServiceProperties{}, fmt.Errorf("decode service properties: %w", err)
	}
	return p, nil
}

// CorsRules returns the CORS rules of account, nil when it has none.
func (s *Store) CorsRules(ctx context.Context, account string) ([]CorsRule, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, sqlGetCorsRules, account).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || len(raw) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, classify(fmt.Errorf("get cors rules: %w", err))
	}
	var rules []CorsRule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return nil, fmt.Errorf("decode cors rules: %w", err)
	}
	return rules, nil
}

// UpdateServiceProperties changes the service properties of account with
// update, which gets the current properties and may refuse the change by
// returning an error (which UpdateServiceProperties returns). Concurrent
// updates of one account run one after the other.
func (s *Store) UpdateServiceProperties(ctx context.Context, account string, update func(*ServiceProperties) error) error {
	def, err := json.Marshal(DefaultServiceProperties())
	if err != nil {
		return fmt.Errorf("encode service properties: %w", err)
	}
	var updateErr error
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlEnsureServiceProperties, account, def); err != nil {
			return err
		}
		var raw []byte
		if err := tx.QueryRow(ctx, sqlLockServiceProperties, account).Scan(&raw); err != nil {
			return err
		}
		var p ServiceProperties
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("decode service properties: %w", err)
		}
		if updateErr = update(&p); updateErr != nil {
			return updateErr
		}
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode service properties: %w", err)
		}
		_, err = tx.Exec(ctx, sqlUpdateServiceProperties, account, b)
		return err
	})
	if updateErr != nil {
		return updateErr
	}
	if err != nil {
		return classify(fmt.Errorf("set service properties: %w", err))
	}
	return nil
}
