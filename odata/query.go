package odata

import (
	"strconv"
	"strings"
)

// maxTop is the largest page the service returns and the largest $top it
// accepts.
const maxTop = 1000

// ParseSelect parses $select.
//
// It returns nil for "all properties" ("", "*", or a list containing "*"),
// otherwise the names in the order given with duplicates dropped, so that
// an Encoder never writes a member twice. Names are not validated further:
// selecting a property no entity has is legal and yields null.
func ParseSelect(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return nil, nil
	}
	items := strings.Split(s, ",")
	names := make([]string, 0, len(items))
	all := false
	for _, item := range items {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			return nil, Detailf(ErrInvalidInput, "The $select value '%s' contains an empty property name.", truncateForMessage(s))
		case item == "*":
			all = true
		case !contains(names, item):
			names = append(names, item)
		}
	}
	if all {
		return nil, nil
	}
	return names, nil
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// ParseTop parses $top: 0 to 1000. 0 asks for no entities at all (Azure
// answers it with an empty page; Storage Explorer sends it).
func ParseTop(s string) (int, error) {
	t := strings.TrimSpace(s)
	ok := t != "" && len(t) <= 10
	for i := 0; ok && i < len(t); i++ {
		ok = isDigit(t[i])
	}
	if ok {
		if n, err := strconv.Atoi(t); err == nil && n >= 0 && n <= maxTop {
			return n, nil
		}
	}
	return 0, Detailf(ErrInvalidInput, "The $top value '%s' is not valid; it must be an integer from 0 to %d.", truncateForMessage(s), maxTop)
}
