package odata

import "strings"

// Format is the JSON metadata level of a response.
type Format uint8

// The three JSON flavours; MinimalMetadata is the default.
const (
	MinimalMetadata Format = iota
	NoMetadata
	FullMetadata
)

// ContentType returns the response Content-Type for f.
func (f Format) ContentType() string {
	switch f {
	case NoMetadata:
		return "application/json;odata=nometadata;streaming=true;charset=utf-8"
	case FullMetadata:
		return "application/json;odata=fullmetadata;streaming=true;charset=utf-8"
	}
	return "application/json;odata=minimalmetadata;streaming=true;charset=utf-8"
}

// mediaKind classifies one media range of $format or Accept.
type mediaKind uint8

const (
	mediaOther mediaKind = iota // neither JSON nor Atom: not acceptable
	mediaJSON                   // a JSON flavour we serve
	mediaAtom                   // application/atom+xml: refused with 415
)

// NegotiateFormat picks the response format from the $format query
// parameter (if non-empty) or else the Accept header.
//
// Every SDK sends an Accept header, so anything we cannot make sense of in
// Accept falls back to minimal metadata rather than failing the request;
// only an Accept that asks for Atom and nothing we serve is refused. An
// explicit $format, on the other hand, must name a format we know.
func NegotiateFormat(formatParam, accept string) (Format, error) {
	if formatParam != "" {
		v := strings.TrimSpace(formatParam)
		switch {
		case strings.EqualFold(v, "json"):
			return MinimalMetadata, nil
		case strings.EqualFold(v, "atom"):
			return 0, Detailf(ErrAtomFormatNotSupported, "Atom format is not supported.")
		}
		f, kind := parseMediaRange(v)
		switch kind {
		case mediaJSON:
			return f, nil
		case mediaAtom:
			return 0, Detailf(ErrAtomFormatNotSupported, "Atom format is not supported.")
		}
		return 0, Detailf(ErrInvalidInput, "The $format value '%s' is not supported.", truncateForMessage(formatParam))
	}
	atom := false
	for rest := accept; rest != ""; {
		var item string
		item, rest, _ = strings.Cut(rest, ",")
		if strings.TrimSpace(item) == "" {
			continue
		}
		f, kind := parseMediaRange(item)
		switch kind {
		case mediaJSON:
			return f, nil
		case mediaAtom:
			atom = true
		}
	}
	if atom {
		return 0, Detailf(ErrAtomFormatNotSupported, "Atom format is not supported.")
	}
	return MinimalMetadata, nil
}

// parseMediaRange reads one "type/subtype;param=value;..." item. Wildcards
// count as JSON: a client that takes anything gets our default.
func parseMediaRange(s string) (Format, mediaKind) {
	typ, params, _ := strings.Cut(s, ";")
	typ = strings.TrimSpace(typ)
	switch {
	case strings.EqualFold(typ, "application/json"), typ == "*/*", strings.EqualFold(typ, "application/*"):
	case strings.EqualFold(typ, "application/atom+xml"):
		return 0, mediaAtom
	default:
		return 0, mediaOther
	}
	f := MinimalMetadata
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(p, "=")
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
		switch {
		case strings.EqualFold(k, "odata"):
			switch {
			case strings.EqualFold(v, "nometadata"):
				f = NoMetadata
			case strings.EqualFold(v, "minimalmetadata"):
				f = MinimalMetadata
			case strings.EqualFold(v, "fullmetadata"):
				f = FullMetadata
			default:
				return 0, mediaOther // e.g. the retired odata=verbose
			}
		case strings.EqualFold(k, "odata.metadata"):
			// The OData v4 spelling; harmless to understand.
			switch {
			case strings.EqualFold(v, "none"):
				f = NoMetadata
			case strings.EqualFold(v, "minimal"):
				f = MinimalMetadata
			case strings.EqualFold(v, "full"):
				f = FullMetadata
			default:
				return 0, mediaOther
			}
		}
	}
	return f, mediaJSON
}

// truncateForMessage shortens client text quoted in an error message so a
// huge input does not produce a huge response, and keeps it valid UTF-8.
func truncateForMessage(s string) string { return Truncate(s, 64) }

// Truncate shortens client text quoted in a message to at most n bytes
// and an ellipsis, without cutting a character in two, and makes it valid
// UTF-8.
func Truncate(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
