package tablecopy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
)

// A source or destination that holds tables' stored access policies and
// the account's service properties, as the XML documents the protocol
// reads and writes (Endpoint and Dir both do).
type (
	policySource interface {
		Policies(ctx context.Context, table string) ([]byte, error)
	}
	policyDestination interface {
		SetPolicies(ctx context.Context, table string, doc []byte) error
	}
	propertiesSource interface {
		ServiceProperties(ctx context.Context) ([]byte, error)
	}
	propertiesDestination interface {
		SetServiceProperties(ctx context.Context, doc []byte) error
	}
)

// copyPolicies copies a table's stored access policies.
func copyPolicies(ctx context.Context, src Source, dst Destination, table string) error {
	s, ok1 := src.(policySource)
	d, ok2 := dst.(policyDestination)
	if !ok1 || !ok2 {
		return errors.New("policies: the source or the destination holds none")
	}
	doc, err := s.Policies(ctx, table)
	if err != nil || doc == nil {
		return err
	}
	return d.SetPolicies(ctx, table, doc)
}

// CopyServiceProperties copies the account's service properties (CORS
// rules, logging, metrics).
func CopyServiceProperties(ctx context.Context, src Source, dst Destination) error {
	s, ok1 := src.(propertiesSource)
	d, ok2 := dst.(propertiesDestination)
	if !ok1 || !ok2 {
		return errors.New("service properties: the source or the destination holds none")
	}
	doc, err := s.ServiceProperties(ctx)
	if err != nil || doc == nil {
		return err
	}
	return d.SetServiceProperties(ctx, doc)
}

// Policies reads a table's stored access policies.
func (e *Endpoint) Policies(ctx context.Context, table string) ([]byte, error) {
	r, err := e.call(ctx, http.MethodGet, "/"+url.PathEscape(table), "comp=acl", map[string]string{"Accept": "application/xml"}, nil, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("policies of %s: %w", table, err)
	}
	return r.Body, nil
}

// SetPolicies replaces a table's stored access policies.
func (e *Endpoint) SetPolicies(ctx context.Context, table string, doc []byte) error {
	_, err := e.call(ctx, http.MethodPut, "/"+url.PathEscape(table), "comp=acl", map[string]string{"Content-Type": "application/xml"}, doc, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("policies of %s: %w", table, err)
	}
	return nil
}

// ServiceProperties reads the account's service properties.
func (e *Endpoint) ServiceProperties(ctx context.Context) ([]byte, error) {
	r, err := e.call(ctx, http.MethodGet, "/", "restype=service&comp=properties", map[string]string{"Accept": "application/xml"}, nil, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("service properties: %w", err)
	}
	return r.Body, nil
}

// SetServiceProperties replaces the account's service properties.
func (e *Endpoint) SetServiceProperties(ctx context.Context, doc []byte) error {
	_, err := e.call(ctx, http.MethodPut, "/", "restype=service&comp=properties", map[string]string{"Content-Type": "application/xml"}, doc, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("service properties: %w", err)
	}
	return nil
}

// The documents of a dump: a table's policies beside its entities, the
// account's service properties beside the manifest.
const serviceProperties = "service-properties.xml"

func policiesFile(table string) string { return table + ".acl.xml" }

// Policies reads a table's stored access policies from the dump, nil
// when it holds none.
func (d *Dir) Policies(_ context.Context, table string) ([]byte, error) {
	return readOptional(filepath.Join(d.path, policiesFile(table)))
}

// SetPolicies writes a table's stored access policies into the dump.
func (d *Dir) SetPolicies(_ context.Context, table string, doc []byte) error {
	return os.WriteFile(filepath.Join(d.path, policiesFile(table)), doc, 0o644)
}

// ServiceProperties reads the account's service properties from the dump,
// nil when it holds none.
func (d *Dir) ServiceProperties(context.Context) ([]byte, error) {
	return readOptional(filepath.Join(d.path, serviceProperties))
}

// SetServiceProperties writes the account's service properties into the
// dump.
func (d *Dir) SetServiceProperties(_ context.Context, doc []byte) error {
	return os.WriteFile(filepath.Join(d.path, serviceProperties), doc, 0o644)
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
