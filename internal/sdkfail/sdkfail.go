// Package sdkfail reads what a failed request of the Azure Tables SDK was
// answered, for tests that drive pgtables through the SDK.
package sdkfail

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

var (
	subStatus = regexp.MustCompile(`HTTP/1\.1 (\d{3}) `)
	subCode   = regexp.MustCompile(`"code":"(\w+)"`)
)

// Of returns the status and error code of a failed request: for an entity
// group transaction answered 202 with a failed sub-response, the
// sub-response's. An error without a response gives -1 and its text.
func Of(err error) (status int, code string) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return -1, err.Error()
	}
	if re.StatusCode != http.StatusAccepted {
		return re.StatusCode, re.ErrorCode
	}
	body, perr := runtime.Payload(re.RawResponse)
	if perr != nil {
		return -1, perr.Error()
	}
	m, c := subStatus.FindSubmatch(body), subCode.FindSubmatch(body)
	if m == nil || c == nil {
		return -1, "unreadable batch answer: " + string(body)
	}
	status, _ = strconv.Atoi(string(m[1]))
	return status, string(c[1])
}
