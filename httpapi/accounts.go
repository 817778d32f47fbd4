package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// DevAccount and DevKey are the well-known development account that the
// Azure SDKs and their samples assume.
const (
	DevAccount = "devstoreaccount1"
	DevKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Account is a storage account with up to two keys (two allow rotation).
type Account struct {
	Name string
	Keys [][]byte // decoded
	// RefuseSharedKey refuses Shared Key, Shared Key Lite and SAS, as
	// Azure does for an account whose AllowSharedKeyAccess is false:
	// only bearer tokens are accepted.
	RefuseSharedKey bool

	// macs keep keyed HMAC-SHA256 states for reuse, one pool per key:
	// every request is verified, and a fresh HMAC costs four allocations.
	macs []sync.Pool
}

// signedBy reports whether sig is the HMAC-SHA256 of msg under one of the
// account's keys. Every key is tried, and each comparison takes constant
// time, so the answer does not leak which key matched.
func (a *Account) signedBy(msg []byte, sig []byte) bool {
	pooled := len(a.macs) == len(a.Keys) // not so in an Account built by hand
	ok := false
	var sum [sha256.Size]byte
	for i, key := range a.Keys {
		var mac hash.Hash
		if pooled {
			mac, _ = a.macs[i].Get().(hash.Hash)
		}
		if mac == nil {
			mac = hmac.New(sha256.New, key)
		}
		mac.Reset()
		mac.Write(msg)
		if hmac.Equal(mac.Sum(sum[:0]), sig) {
			ok = true
		}
		if pooled {
			a.macs[i].Put(mac)
		}
	}
	return ok
}

// Accounts is the set of configured accounts, by name.
type Accounts map[string]*Account

// DevAccounts returns the development account alone.
func DevAccounts() Accounts {
	a, err := ParseAccounts(DevAccount + ":" + DevKey)
	if err != nil {
		panic(err) // the constant is valid
	}
	return a
}

// ParseAccounts reads "name1:key1[:key2];name2:key1", the format of
// Azurite's AZURITE_ACCOUNTS. Keys are base64.
func ParseAccounts(s string) (Accounts, error) {
	accts := Accounts{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.Split(entry, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("account %q: want name:key1[:key2]", parts[0])
		}
		name := parts[0]
		if !validAccountName(name) {
			return nil, fmt.Errorf("account %q: a name is 3 to 24 lower-case letters and digits", name)
		}
		if _, dup := accts[name]; dup {
			return nil, fmt.Errorf("account %q: listed twice", name)
		}
		a := &Account{Name: name, macs: make([]sync.Pool, len(parts)-1)}
		for i, k := range parts[1:] {
			key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
			if err != nil || len(key) == 0 {
				return nil, fmt.Errorf("account %q: key %d is not base64", name, i+1)
			}
			a.Keys = append(a.Keys, key)
		}
		accts[name] = a
	}
	if len(accts) == 0 {
		return nil, fmt.Errorf("no accounts")
	}
	return accts, nil
}

// RefuseSharedKey makes the named accounts accept bearer tokens only.
func (a Accounts) RefuseSharedKey(names []string) error {
	for _, n := range names {
		acct := a[n]
		if acct == nil {
			return fmt.Errorf("account %q is not configured", n)
		}
		acct.RefuseSharedKey = true
	}
	return nil
}

// validAccountName follows Azure's rule, which also keeps names clear of
// the "-" that marks operational endpoints (/-/ready) and "-secondary".
func validAccountName(s string) bool {
	if len(s) < 3 || len(s) > 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
