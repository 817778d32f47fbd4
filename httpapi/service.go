package httpapi

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Get and Set Table Service Properties and Get Table Service Stats
// (rest-protocol.md §3.14-§3.16). The properties are stored per account;
// only the CORS rules have an effect (cors.go).

// maxCorsRules is how many CORS rules an account may have.
const maxCorsRules = 5

// Azure's limits on one CORS rule's lists.
const (
	maxCorsListEntries = 64
	maxCorsEntryLen    = 256
)

// corsMethods are the methods a CORS rule of the Table service may allow.
var corsMethods = []string{"DELETE", "GET", "HEAD", "MERGE", "POST", "OPTIONS", "PUT", "PATCH"}

// serviceOperation answers restype=service requests on the service root.
func (rq *request) serviceOperation(method string) error {
	switch comp := rq.query.Get("comp"); comp {
	case "properties":
		switch method {
		case http.MethodGet:
			return rq.getServiceProperties()
		case http.MethodPut:
			return rq.setServiceProperties()
		}
		return errMethodNotAllowed
	case "stats":
		if method == http.MethodGet {
			return rq.getServiceStats()
		}
		return errMethodNotAllowed
	case "":
		return odata.Detailf(errMissingQueryParam, "A query parameter that's mandatory for this request is not specified: comp.")
	default:
		return odata.Detailf(errInvalidQueryParam, "The value '%s' of the query parameter comp is not valid for the service.", odata.Truncate(comp, 40))
	}
}

func (rq *request) getServiceProperties() error {
	p, err := rq.srv.store.ServiceProperties(rq.r().Context(), rq.t.account)
	if err != nil {
		return err
	}
	return rq.writeXML(http.StatusOK, appendServiceProperties([]byte(xmlHeader), &p))
}

// getServiceStats answers as a healthy primary whose secondary is in sync:
// there is no geo-replication to report on. It answers on the primary and
// the -secondary endpoint alike (Go's SDK asks the primary).
func (rq *request) getServiceStats() error {
	body := []byte(xmlHeader + "<StorageServiceStats><GeoReplication><Status>live</Status>")
	body = appendXMLElement(body, "LastSyncTime", rq.srv.now().UTC().Format(http.TimeFormat))
	body = append(body, "</GeoReplication></StorageServiceStats>"...)
	return rq.writeXML(http.StatusOK, body)
}

func (rq *request) setServiceProperties() error {
	body, err := rq.readXMLBody()
	if err != nil {
		return err
	}
	var doc xmlServiceProperties
	if len(bytes.TrimSpace(body)) == 0 {
		return odata.Detailf(errInvalidXMLDocument, "XML specified is not syntactically valid. The body is empty.")
	}
	if err := decodeXMLDocument(body, &doc); err != nil {
		return err
	}
	if err := rq.srv.store.UpdateServiceProperties(rq.r().Context(), rq.t.account, doc.apply); err != nil {
		return err
	}
	return rq.writeNoContent(http.StatusAccepted)
}

// xmlServiceProperties is the body of Set Table Service Properties. Every
// element is optional: what is absent keeps its stored value.
type xmlServiceProperties struct {
	XMLName       xml.Name    `xml:"StorageServiceProperties"`
	Logging       *xmlLogging `xml:"Logging"`
	HourMetrics   *xmlMetrics `xml:"HourMetrics"`
	MinuteMetrics *xmlMetrics `xml:"MinuteMetrics"`
	Cors          *struct {
		Rules []xmlCorsRule `xml:"CorsRule"`
	} `xml:"Cors"`
}

type xmlLogging struct {
	Version         *string       `xml:"Version"`
	Delete          *string       `xml:"Delete"`
	Read            *string       `xml:"Read"`
	Write           *string       `xml:"Write"`
	RetentionPolicy *xmlRetention `xml:"RetentionPolicy"`
}

type xmlMetrics struct {
	Version         *string       `xml:"Version"`
	Enabled         *string       `xml:"Enabled"`
	IncludeAPIs     *string       `xml:"IncludeAPIs"`
	RetentionPolicy *xmlRetention `xml:"RetentionPolicy"`
}

type xmlRetention struct {
	Enabled *string `xml:"Enabled"`
	Days    *string `xml:"Days"`
}

type xmlCorsRule struct {
	AllowedOrigins  *string `xml:"AllowedOrigins"`
	AllowedMethods  *string `xml:"AllowedMethods"`
	AllowedHeaders  *string `xml:"AllowedHeaders"`
	ExposedHeaders  *string `xml:"ExposedHeaders"`
	MaxAgeInSeconds *string `xml:"MaxAgeInSeconds"`
}

// apply merges the document into p and validates the result.
func (d *xmlServiceProperties) apply(p *store.ServiceProperties) error {
	if l := d.Logging; l != nil {
		if err := setVersion("Logging/Version", l.Version, &p.Logging.Version); err != nil {
			return err
		}
		for _, f := range []struct {
			name string
			v    *string
			dst  *bool
		}{{"Logging/Delete", l.Delete, &p.Logging.Delete}, {"Logging/Read", l.Read, &p.Logging.Read}, {"Logging/Write", l.Write, &p.Logging.Write}} {
			if err := setBool(f.name, f.v, f.dst); err != nil {
				return err
			}
		}
		if err := l.RetentionPolicy.apply("Logging/RetentionPolicy", &p.Logging.RetentionPolicy); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		name string
		x    *xmlMetrics
		dst  *store.Metrics
	}{{"HourMetrics", d.HourMetrics, &p.HourMetrics}, {"MinuteMetrics", d.MinuteMetrics, &p.MinuteMetrics}} {
		if m.x == nil {
			continue
		}
		if err := setVersion(m.name+"/Version", m.x.Version, &m.dst.Version); err != nil {
			return err
		}
		if err := setBool(m.name+"/Enabled", m.x.Enabled, &m.dst.Enabled); err != nil {
			return err
		}
		if err := setBool(m.name+"/IncludeAPIs", m.x.IncludeAPIs, &m.dst.IncludeAPIs); err != nil {
			return err
		}
		if !m.dst.Enabled {
			m.dst.IncludeAPIs = false
		}
		if err := m.x.RetentionPolicy.apply(m.name+"/RetentionPolicy", &m.dst.RetentionPolicy); err != nil {
			return err
		}
	}
	if d.Cors != nil {
		if len(d.Cors.Rules) > maxCorsRules {
			return odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. At most %d CORS rules are allowed; got %d.", maxCorsRules, len(d.Cors.Rules))
		}
		rules := make([]store.CorsRule, 0, len(d.Cors.Rules))
		for i := range d.Cors.Rules {
			r, err := d.Cors.Rules[i].rule()
			if err != nil {
				return err
			}
			rules = append(rules, r)
		}
		p.Cors = rules
	}
	return nil
}

func (x *xmlRetention) apply(name string, p *store.RetentionPolicy) error {
	if x == nil {
		return nil
	}
	if err := setBool(name+"/Enabled", x.Enabled, &p.Enabled); err != nil {
		return err
	}
	if x.Days != nil && strings.TrimSpace(*x.Days) != "" {
		days, err := strconv.Atoi(strings.TrimSpace(*x.Days))
		if err != nil || days < 1 || days > 365 {
			return invalidNode(name+"/Days", *x.Days)
		}
		p.Days = days
	}
	switch {
	case !p.Enabled:
		p.Days = 0
	case p.Days == 0:
		return odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. %s/Days (1 to 365) is required when the policy is enabled.", name)
	}
	return nil
}

func (x *xmlCorsRule) rule() (store.CorsRule, error) {
	var r store.CorsRule
	if x.AllowedOrigins == nil || len(splitList(*x.AllowedOrigins)) == 0 {
		return r, odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. A CORS rule needs AllowedOrigins.")
	}
	if x.AllowedMethods == nil || len(splitList(*x.AllowedMethods)) == 0 {
		return r, odata.Detailf(errInvalidXMLNodeValue, "The value for one of the XML nodes is not in the correct format. A CORS rule needs AllowedMethods.")
	}
	for _, m := range splitList(*x.AllowedMethods) {
		known := false
		for _, c := range corsMethods {
			known = known || strings.EqualFold(m, c)
		}
		if !known {
			return r, invalidNode("CorsRule/AllowedMethods", *x.AllowedMethods)
		}
	}
	r.AllowedOrigins, r.AllowedMethods = strings.TrimSpace(*x.AllowedOrigins), strings.TrimSpace(*x.AllowedMethods)
	if x.AllowedHeaders != nil {
		r.AllowedHeaders = strings.TrimSpace(*x.AllowedHeaders)
	}
	if x.ExposedHeaders != nil {
		r.ExposedHeaders = strings.TrimSpace(*x.ExposedHeaders)
	}
	for _, f := range []struct{ name, v string }{
		{"AllowedOrigins", r.AllowedOrigins}, {"AllowedMethods", r.AllowedMethods},
		{"AllowedHeaders", r.AllowedHeaders}, {"ExposedHeaders", r.ExposedHeaders},
	} {
		entries := splitList(f.v)
		if len(entries) > maxCorsListEntries {
			return r, invalidNode("CorsRule/"+f.name, f.v)
		}
		for _, e := range entries {
			if len(e) > maxCorsEntryLen {
				return r, invalidNode("CorsRule/"+f.name, e)
			}
		}
	}
	if x.MaxAgeInSeconds != nil && strings.TrimSpace(*x.MaxAgeInSeconds) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(*x.MaxAgeInSeconds))
		if err != nil || n < 0 {
			return r, invalidNode("CorsRule/MaxAgeInSeconds", *x.MaxAgeInSeconds)
		}
		r.MaxAgeInSeconds = n
	}
	return r, nil
}

// setVersion sets an analytics version; present, it must not be empty.
func setVersion(name string, v *string, dst *string) error {
	if v == nil {
		return nil
	}
	s := strings.TrimSpace(*v)
	if s == "" || len(s) > 10 {
		return invalidNode(name, *v)
	}
	*dst = s
	return nil
}

// setBool sets a boolean element: true or false, in any case.
func setBool(name string, v *string, dst *bool) error {
	if v == nil {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(*v)) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return invalidNode(name, *v)
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks around and
// empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// appendServiceProperties writes the StorageServiceProperties document.
func appendServiceProperties(dst []byte, p *store.ServiceProperties) []byte {
	dst = append(dst, "<StorageServiceProperties><Logging>"...)
	dst = appendXMLElement(dst, "Version", p.Logging.Version)
	dst = appendXMLElement(dst, "Read", strconv.FormatBool(p.Logging.Read))
	dst = appendXMLElement(dst, "Write", strconv.FormatBool(p.Logging.Write))
	dst = appendXMLElement(dst, "Delete", strconv.FormatBool(p.Logging.Delete))
	dst = appendRetention(dst, p.Logging.RetentionPolicy)
	dst = append(dst, "</Logging>"...)
	for _, m := range []struct {
		name string
		m    *store.Metrics
	}{{"HourMetrics", &p.HourMetrics}, {"MinuteMetrics", &p.MinuteMetrics}} {
		dst = append(dst, "<"+m.name+">"...)
		dst = appendXMLElement(dst, "Version", m.m.Version)
		dst = appendXMLElement(dst, "Enabled", strconv.FormatBool(m.m.Enabled))
		if m.m.Enabled {
			dst = appendXMLElement(dst, "IncludeAPIs", strconv.FormatBool(m.m.IncludeAPIs))
		}
		dst = appendRetention(dst, m.m.RetentionPolicy)
		dst = append(dst, "</"+m.name+">"...)
	}
	if len(p.Cors) == 0 {
		dst = append(dst, "<Cors />"...)
	} else {
		dst = append(dst, "<Cors>"...)
		for _, r := range p.Cors {
			dst = append(dst, "<CorsRule>"...)
			dst = appendXMLElement(dst, "AllowedMethods", r.AllowedMethods)
			dst = appendXMLElement(dst, "AllowedOrigins", r.AllowedOrigins)
			dst = appendXMLElement(dst, "AllowedHeaders", r.AllowedHeaders)
			dst = appendXMLElement(dst, "ExposedHeaders", r.ExposedHeaders)
			dst = appendXMLElement(dst, "MaxAgeInSeconds", strconv.Itoa(r.MaxAgeInSeconds))
			dst = append(dst, "</CorsRule>"...)
		}
		dst = append(dst, "</Cors>"...)
	}
	return append(dst, "</StorageServiceProperties>"...)
}

func appendRetention(dst []byte, r store.RetentionPolicy) []byte {
	dst = append(dst, "<RetentionPolicy>"...)
	dst = appendXMLElement(dst, "Enabled", strconv.FormatBool(r.Enabled))
	if r.Enabled {
		dst = appendXMLElement(dst, "Days", strconv.Itoa(r.Days))
	}
	return append(dst, "</RetentionPolicy>"...)
}
