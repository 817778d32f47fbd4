package odata

import (
	"errors"
	"fmt"
)

// Sentinel errors for client input that the protocol rejects. Each maps to
// one Azure error code in httpapi; wrap them with Detailf to tell the client
// what exactly was wrong.
var (
	ErrInvalidInput           = errors.New("invalid input")
	ErrOutOfRangeInput        = errors.New("input out of range")
	ErrPropertiesNeedValue    = errors.New("properties need value")
	ErrPropertyNameInvalid    = errors.New("property name invalid")
	ErrPropertyNameTooLong    = errors.New("property name too long")
	ErrPropertyValueTooLarge  = errors.New("property value too large")
	ErrEntityTooLarge         = errors.New("entity too large")
	ErrTooManyProperties      = errors.New("too many properties")
	ErrDuplicateProperties    = errors.New("duplicate properties specified")
	ErrNotImplemented         = errors.New("not implemented")
	ErrAtomFormatNotSupported = errors.New("atom format not supported")
	ErrMediaTypeNotSupported  = errors.New("media type not supported")
)

// DetailError carries a client-facing explanation alongside a sentinel error.
type DetailError struct {
	Err    error
	Detail string
}

func (e *DetailError) Error() string { return e.Err.Error() + ": " + e.Detail }

// Unwrap returns the sentinel.
func (e *DetailError) Unwrap() error { return e.Err }

// Detailf wraps a sentinel with a message for the client.
func Detailf(sentinel error, format string, args ...any) error {
	return &DetailError{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// ErrInvalidResourceName reports a table name with characters outside [A-Za-z0-9].
var ErrInvalidResourceName = errors.New("invalid resource name")
