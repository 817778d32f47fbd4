package odata

import "testing"

func TestNegotiateFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, format, accept string
		want                 Format
		err                  error
	}{
		{"nothing", "", "", MinimalMetadata, nil},
		{"bare json", "", "application/json", MinimalMetadata, nil},
		{"minimal", "", "application/json;odata=minimalmetadata", MinimalMetadata, nil},
		{"none", "", "application/json;odata=nometadata", NoMetadata, nil},
		{"full", "", "application/json;odata=fullmetadata", FullMetadata, nil},
		{"case and spaces", "", "Application/JSON ; OData=NoMetadata ; charset=utf-8", NoMetadata, nil},
		{"other params", "", "application/json;streaming=true;odata=fullmetadata;charset=utf-8", FullMetadata, nil},
		{"quoted param", "", `application/json;odata="nometadata"`, NoMetadata, nil},
		{"v4 spelling", "", "application/json;odata.metadata=full", FullMetadata, nil},
		{"wildcard", "", "*/*", MinimalMetadata, nil},
		{"application wildcard", "", "application/*", MinimalMetadata, nil},
		{"list picks first JSON", "", "application/atom+xml, application/json;odata=nometadata, application/json", NoMetadata, nil},
		{"list with q", "", "text/html;q=0.9, application/json;odata=fullmetadata;q=0.5", FullMetadata, nil},
		{"atom only", "", "application/atom+xml", 0, ErrAtomFormatNotSupported},
		{"atom and xml", "", "application/atom+xml,application/xml", 0, ErrAtomFormatNotSupported},
		{"xml falls back", "", "application/xml", MinimalMetadata, nil},
		{"text falls back", "", "text/plain", MinimalMetadata, nil},
		{"verbose skipped", "", "application/json;odata=verbose", MinimalMetadata, nil},
		{"verbose then none", "", "application/json;odata=verbose,application/json;odata=nometadata", NoMetadata, nil},
		{"$format wins", "application/json;odata=fullmetadata", "application/json;odata=nometadata", FullMetadata, nil},
		{"$format encoded by .NET", "application/json;odata=minimalmetadata", "application/json;odata=nometadata", MinimalMetadata, nil},
		{"$format json", "json", "application/json;odata=nometadata", MinimalMetadata, nil},
		{"$format JSON", "JSON", "", MinimalMetadata, nil},
		{"$format nometadata", "application/json;odata=nometadata", "", NoMetadata, nil},
		{"$format atom", "atom", "application/json", 0, ErrAtomFormatNotSupported},
		{"$format atom type", "application/atom+xml", "application/json", 0, ErrAtomFormatNotSupported},
		{"$format unknown", "xml", "application/json", 0, ErrInvalidInput},
		{"$format text", "text/plain", "", 0, ErrInvalidInput},
		{"$format bad odata", "application/json;odata=verbose", "", 0, ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NegotiateFormat(tt.format, tt.accept)
			if checkErr(t, err, tt.err) && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    Format
		want string
	}{
		{MinimalMetadata, "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"},
		{NoMetadata, "application/json;odata=nometadata;streaming=true;charset=utf-8"},
		{FullMetadata, "application/json;odata=fullmetadata;streaming=true;charset=utf-8"},
	}
	for _, tt := range tests {
		if got := tt.f.ContentType(); got != tt.want {
			t.Errorf("%d: got %q, want %q", tt.f, got, tt.want)
		}
		// The Content-Type must negotiate back to the same format.
		if f, err := NegotiateFormat("", tt.want); err != nil || f != tt.f {
			t.Errorf("%q negotiates to %d, %v", tt.want, f, err)
		}
	}
}
