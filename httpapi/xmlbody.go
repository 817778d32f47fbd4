package httpapi

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"

	"github.com/pgtables/pgtables/odata"
)

// The XML operations (table ACLs, service properties, stats) read and write
// small documents. Reading is order-insensitive by construction: elements
// are matched by name into structs, whatever their order, and unknown
// elements are ignored. Writing is by hand, in Azure's element order.

const xmlHeader = `<?xml version="1.0" encoding="utf-8"?>`

// readXMLBody reads the request body within the size limit.
func (rq *request) readXMLBody() ([]byte, error) {
	body, err := rq.readBody(errInvalidXMLDocument)
	if err != nil {
		return nil, err
	}
	// Azure writes a byte order mark before its documents; accept one.
	return bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), nil
}

// decodeXMLDocument decodes body, which must be exactly one well-formed
// document whose root element v names, into v.
func decodeXMLDocument(body []byte, v any) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(v); err != nil {
		return odata.Detailf(errInvalidXMLDocument, "XML specified is not syntactically valid. %s", odata.Truncate(err.Error(), 200))
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return odata.Detailf(errInvalidXMLDocument, "XML specified is not syntactically valid. %s", odata.Truncate(err.Error(), 200))
		}
		switch tok := tok.(type) {
		case xml.CharData:
			if strings.TrimSpace(string(tok)) == "" {
				continue
			}
		case xml.Comment, xml.ProcInst:
			continue
		}
		return odata.Detailf(errInvalidXMLDocument, "XML specified is not syntactically valid. The document has content after its root element.")
	}
}

// appendXMLElement appends <name>text</name>.
func appendXMLElement(dst []byte, name, text string) []byte {
	dst = append(dst, '<')
	dst = append(dst, name...)
	dst = append(dst, '>')
	dst = appendXMLText(dst, text)
	dst = append(dst, "</"...)
	dst = append(dst, name...)
	return append(dst, '>')
}

// writeXML sends an XML document.
func (rq *request) writeXML(status int, body []byte) error {
	return rq.c.Blob(status, "application/xml", body)
}

// invalidNode reports a bad value of an XML element.
func invalidNode(name, value string) error {
	return odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. Node %s, value '%s'.", name, odata.Truncate(value, 100))
}
