package tableapi

import (
	"errors"
	"fmt"
	"strings"
)

// Azurite's development account, which UseDevelopmentStorage=true names.
const (
	devAccount  = "devstoreaccount1"
	devKey      = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	devEndpoint = "http://127.0.0.1:10002/devstoreaccount1"
)

// Dial returns a client for an Azure Storage connection string, as the
// SDKs take it: AccountName and AccountKey, or SharedAccessSignature; the
// table endpoint from TableEndpoint, or made of DefaultEndpointsProtocol,
// AccountName and EndpointSuffix; or UseDevelopmentStorage=true.
func Dial(connectionString string) (*Client, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(connectionString, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("connection string: %q is not key=value", part)
		}
		kv[strings.ToLower(k)] = v
	}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		return NewClient(devEndpoint, devAccount, devKey)
	}
	account, endpoint := kv["accountname"], kv["tableendpoint"]
	if endpoint == "" {
		if account == "" {
			return nil, errors.New("connection string: neither TableEndpoint nor AccountName")
		}
		proto, suffix := kv["defaultendpointsprotocol"], kv["endpointsuffix"]
		if proto == "" {
			proto = "https"
		}
		if suffix == "" {
			suffix = "core.windows.net"
		}
		endpoint = proto + "://" + account + ".table." + suffix
	}
	if sas := kv["sharedaccesssignature"]; sas != "" {
		return NewSASClient(endpoint, sas)
	}
	if account == "" || kv["accountkey"] == "" {
		return nil, errors.New("connection string: AccountName and AccountKey, or SharedAccessSignature, are needed")
	}
	return NewClient(endpoint, account, kv["accountkey"])
}
