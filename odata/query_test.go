package odata

import (
	"slices"
	"testing"
)

func TestParseSelect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{"", nil, nil},
		{"*", nil, nil},
		{" * ", nil, nil},
		{"A", []string{"A"}, nil},
		{"V,RowKey", []string{"V", "RowKey"}, nil},
		{" A , B ,C ", []string{"A", "B", "C"}, nil},
		{"A,B,A", []string{"A", "B"}, nil},
		{"A,*", nil, nil},
		{"Manager Rating", []string{"Manager Rating"}, nil},
		{"A,,B", nil, ErrInvalidInput},
		{"A,", nil, ErrInvalidInput},
		{",A", nil, ErrInvalidInput},
		{",", nil, ErrInvalidInput},
		{"A, ,B", nil, ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSelect(tt.in)
			if checkErr(t, err, tt.err) && !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
		err  error
	}{
		{"1", 1, nil},
		{"50", 50, nil},
		{"1000", 1000, nil},
		{"0010", 10, nil},
		{" 5 ", 5, nil},
		{"0", 0, nil},
		{"000", 0, nil},
		{"1001", 0, ErrInvalidInput},
		{"-1", 0, ErrInvalidInput},
		{"+5", 0, ErrInvalidInput},
		{"", 0, ErrInvalidInput},
		{"abc", 0, ErrInvalidInput},
		{"5.0", 0, ErrInvalidInput},
		{"1e3", 0, ErrInvalidInput},
		{"99999999999999999999999", 0, ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseTop(tt.in)
			if checkErr(t, err, tt.err) && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
