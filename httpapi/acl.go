package httpapi

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Get and Set Table ACL (rest-protocol.md §3.12, §3.13): the stored access
// policies that a service SAS names with si. Only the account key may read
// or set them (sasGrant.authorize refuses every SAS).

// maxPolicyIDLen is the longest SignedIdentifier Id, in characters.
const maxPolicyIDLen = 64

// xmlSignedIdentifiers is the body of Set Table ACL. Pointers tell absent
// elements from empty ones.
type xmlSignedIdentifiers struct {
	XMLName xml.Name `xml:"SignedIdentifiers"`
	Items   []struct {
		ID     *string `xml:"Id"`
		Policy *struct {
			Start      *string `xml:"Start"`
			Expiry     *string `xml:"Expiry"`
			Permission *string `xml:"Permission"`
		} `xml:"AccessPolicy"`
	} `xml:"SignedIdentifier"`
}

// tableACL answers comp=... on a table: Get or Set Table ACL.
func (rq *request) tableACL(method string) error {
	if comp := rq.query.Get("comp"); comp != "acl" {
		return odata.Detailf(errInvalidQueryParam, "The value '%s' of the query parameter comp is not valid for a table.", odata.Truncate(comp, 40))
	}
	switch method {
	case http.MethodGet:
		return rq.getTableACL()
	case http.MethodPut:
		return rq.setTableACL()
	}
	return errMethodNotAllowed
}

func (rq *request) getTableACL() error {
	policies, err := rq.srv.store.GetACL(rq.r().Context(), rq.t.account, rq.t.table)
	if err != nil {
		return err
	}
	return rq.writeXML(http.StatusOK, appendACL([]byte(xmlHeader), policies))
}

// appendACL writes the SignedIdentifiers document, each policy with only
// the fields it has; one without any has no AccessPolicy element, as Azure
// writes it (the SDKs read that as an empty or absent policy).
func appendACL(dst []byte, policies []store.AccessPolicy) []byte {
	if len(policies) == 0 {
		return append(dst, "<SignedIdentifiers />"...)
	}
	dst = append(dst, "<SignedIdentifiers>"...)
	for _, p := range policies {
		dst = append(dst, "<SignedIdentifier>"...)
		dst = appendXMLElement(dst, "Id", p.ID)
		if p.Start == nil && p.Expiry == nil && p.Permission == nil {
			dst = append(dst, "</SignedIdentifier>"...)
			continue
		}
		dst = append(dst, "<AccessPolicy>"...)
		if p.Start != nil {
			dst = appendXMLElement(dst, "Start", string(odata.AppendDateTime(nil, *p.Start, true)))
		}
		if p.Expiry != nil {
			dst = appendXMLElement(dst, "Expiry", string(odata.AppendDateTime(nil, *p.Expiry, true)))
		}
		if p.Permission != nil {
			dst = appendXMLElement(dst, "Permission", *p.Permission)
		}
		dst = append(dst, "</AccessPolicy></SignedIdentifier>"...)
	}
	return append(dst, "</SignedIdentifiers>"...)
}

func (rq *request) setTableACL() error {
	body, err := rq.readXMLBody()
	if err != nil {
		return err
	}
	policies, err := parseACL(body)
	if err != nil {
		return err
	}
	if err := rq.srv.store.SetACL(rq.r().Context(), rq.t.account, rq.t.table, policies); err != nil {
		return err
	}
	return rq.writeNoContent(http.StatusNoContent)
}

// parseACL reads a Set Table ACL body. An empty body clears the ACL.
func parseACL(body []byte) ([]store.AccessPolicy, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var doc xmlSignedIdentifiers
	if err := decodeXMLDocument(body, &doc); err != nil {
		return nil, err
	}
	if len(doc.Items) > store.MaxAccessPolicies {
		return nil, odata.Detailf(errInvalidXMLDocument, "XML specified is not syntactically valid. A table may have at most %d signed identifiers.", store.MaxAccessPolicies)
	}
	policies := make([]store.AccessPolicy, 0, len(doc.Items))
	seen := map[string]bool{}
	for _, it := range doc.Items {
		if it.ID == nil || *it.ID == "" || utf8.RuneCountInString(*it.ID) > maxPolicyIDLen {
			id := ""
			if it.ID != nil {
				id = *it.ID
			}
			return nil, odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. A SignedIdentifier needs an Id of 1 to %d characters; got '%s'.", maxPolicyIDLen, odata.Truncate(id, 100))
		}
		if seen[*it.ID] {
			return nil, odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. The Id '%s' appears twice.", *it.ID)
		}
		seen[*it.ID] = true
		p := store.AccessPolicy{ID: *it.ID}
		if ap := it.Policy; ap != nil {
			var err error
			if p.Start, err = parsePolicyTime("Start", ap.Start); err != nil {
				return nil, err
			}
			if p.Expiry, err = parsePolicyTime("Expiry", ap.Expiry); err != nil {
				return nil, err
			}
			if ap.Permission != nil {
				if perm := strings.TrimSpace(*ap.Permission); perm != "" {
					norm, ok := normalizePermissions(perm)
					if !ok {
						return nil, invalidNode("Permission", perm)
					}
					p.Permission = &norm
				}
			}
		}
		policies = append(policies, p)
	}
	return policies, nil
}

// parsePolicyTime reads Start or Expiry: ISO 8601, any zone; empty means
// absent.
func parsePolicyTime(name string, s *string) (*int64, error) {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil, nil
	}
	ticks, ok := odata.ParseDateTime(strings.TrimSpace(*s))
	if !ok || !odata.ValidDateTime(ticks) {
		return nil, invalidNode(name, *s)
	}
	return &ticks, nil
}

// normalizePermissions puts table permission letters in Azure's order,
// "raud"; any other letter is refused.
func normalizePermissions(s string) (string, bool) {
	if strings.Trim(s, "raud") != "" {
		return "", false
	}
	var b []byte
	for _, c := range []byte("raud") {
		if strings.IndexByte(s, c) >= 0 {
			b = append(b, c)
		}
	}
	return string(b), true
}
