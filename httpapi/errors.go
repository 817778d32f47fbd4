package httpapi

import (
	"errors"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Errors of the HTTP layer itself.
var (
	errResourceNotFound      = errors.New("resource not found")
	errMethodNotAllowed      = errors.New("method not allowed")
	errMissingHeader         = errors.New("missing required header")
	errInvalidHeader         = errors.New("invalid header value")
	errInvalidQueryParam     = errors.New("invalid query parameter value")
	errBodyTooLarge          = errors.New("request body too large")
	errXMethodNotUsingPost   = errors.New("x-http-method not using post")
	errXMethodIncorrectValue = errors.New("x-http-method incorrect value")
	errXMethodIncorrectCount = errors.New("x-http-method incorrect count")
	errCorsPreflight         = errors.New("cors preflight failure")
	errInternal              = errors.New("internal error")
)

// errDeleteNeedsMatch: Delete Entity without If-Match.
var errDeleteNeedsMatch = odata.Detailf(errMissingHeader, "The If-Match header is required to delete an entity; send * to delete any version.")

// Errors of shared access signatures, ACLs and service properties.
var (
	errAuthorizationFailure = errors.New("authorization failure")
	errPermissionMismatch   = errors.New("authorization permission mismatch")
	errProtocolMismatch     = errors.New("authorization protocol mismatch")
	errSourceIPMismatch     = errors.New("authorization source ip mismatch")
	errServiceMismatch      = errors.New("authorization service mismatch")
	errResourceTypeMismatch = errors.New("authorization resource type mismatch")
	errInvalidXMLDocument   = errors.New("invalid xml document")
	errInvalidXMLNodeValue  = errors.New("invalid xml node value")
	errMissingQueryParam    = errors.New("missing required query parameter")
)

// Azure's messages for failed authentication.
const (
	msgAuthenticationFailed = "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature."
	msgSeeChallenge         = "Server failed to authenticate the request. Please refer to the information in the www-authenticate header."
)

// apiError is an Azure error: status, code and the service's message.
type apiError struct {
	status  int
	code    string
	message string
}

// errorTable is the one mapping from domain errors to Azure error codes.
// The first entry whose error matches (errors.Is) wins.
var errorTable = []struct {
	err error
	apiError
}{
	{store.ErrTableNotFound, apiError{404, "TableNotFound", "The table specified does not exist."}},
	{store.ErrTableExists, apiError{409, "TableAlreadyExists", "The table specified already exists."}},
	{store.ErrEntityNotFound, apiError{404, "ResourceNotFound", "The specified resource does not exist."}},
	{store.ErrEntityExists, apiError{409, "EntityAlreadyExists", "The specified entity already exists."}},
	{store.ErrConditionNotMet, apiError{412, "UpdateConditionNotSatisfied", "The update condition specified in the request was not satisfied."}},
	{store.ErrIndexExists, apiError{409, "IndexAlreadyExists", "The table already has an index on that property, type and order."}},
	{store.ErrIndexNotFound, apiError{404, "IndexNotFound", "The table has no index of that name."}},
	{store.ErrTooManyIndexes, apiError{409, "TooManyIndexes", "The table has as many indexes as it may have."}},
	{store.ErrIndexType, apiError{400, "InvalidIndex", "An index needs a property name and one of the eight EDM types."}},
	{store.ErrChangeFeedOff, apiError{409, "ChangeFeedDisabled", "The change feed is switched off for this account."}},
	{store.ErrCursorExpired, apiError{410, "ChangeFeedCursorExpired", "The changes after the cursor are past retention."}},
	{store.ErrInvalidCursor, apiError{400, "InvalidQueryParameterValue", "Value for one of the query parameters specified in the request URI is invalid."}},
	{store.ErrUnavailable, apiError{503, "ServerBusy", "The server is currently unable to receive requests. Please retry your request."}},
	{errResourceNotFound, apiError{404, "ResourceNotFound", "The specified resource does not exist."}},
	{errAuthFailed, apiError{403, "AuthenticationFailed", msgAuthenticationFailed}},
	{errBearerOverHTTP, apiError{403, "AuthenticationFailed", msgAuthenticationFailed}},
	{errNoAuthInfo, apiError{401, "NoAuthenticationInformation", msgSeeChallenge}},
	{errInvalidAuthInfo, apiError{401, "InvalidAuthenticationInfo", msgSeeChallenge}},
	{errKeyAuthNotPermitted, apiError{403, "KeyBasedAuthenticationNotPermitted", "Key based authentication is not permitted on this storage account."}},
	{odata.ErrInvalidInput, apiError{400, "InvalidInput", "One of the request inputs is not valid."}},
	{odata.ErrOutOfRangeInput, apiError{400, "OutOfRangeInput", "One of the request inputs is out of range."}},
	{odata.ErrInvalidResourceName, apiError{400, "InvalidResourceName", "The specifed resource name contains invalid characters."}},
	{odata.ErrPropertiesNeedValue, apiError{400, "PropertiesNeedValue", "Values have not been specified for all properties in the entity."}},
	{odata.ErrPropertyNameInvalid, apiError{400, "PropertyNameInvalid", "The property name is invalid."}},
	{odata.ErrPropertyNameTooLong, apiError{400, "PropertyNameTooLong", "The property name exceeds the maximum allowed length."}},
	{odata.ErrPropertyValueTooLarge, apiError{400, "PropertyValueTooLarge", "The property value exceeds the maximum allowed size (64KB). If the property value is a string, it is UTF-16 encoded and the maximum number of characters should be 32K or less."}},
	{odata.ErrEntityTooLarge, apiError{400, "EntityTooLarge", "The entity is larger than the maximum allowed size (1MB)."}},
	{odata.ErrTooManyProperties, apiError{400, "TooManyProperties", "The entity contains more properties than allowed. Each entity can include up to 252 properties to store data. Each entity also has 3 system properties."}},
	{odata.ErrDuplicateProperties, apiError{400, "DuplicatePropertiesSpecified", "A property is specified more than one time."}},
	{odata.ErrNotImplemented, apiError{501, "NotImplemented", "The requested operation is not implemented on the specified resource."}},
	{odata.ErrAtomFormatNotSupported, apiError{415, "AtomFormatNotSupported", "Atom format is not supported."}},
	{odata.ErrMediaTypeNotSupported, apiError{415, "MediaTypeNotSupported", "None of the provided media types are supported."}},
	{errInvalidURI, apiError{400, "InvalidUri", "The requested URI does not represent any resource on the server."}},
	{errMethodNotAllowed, apiError{405, "MethodNotAllowed", "The requested method is not allowed on the specified resource."}},
	{errMissingHeader, apiError{400, "MissingRequiredHeader", "An HTTP header that's mandatory for this request is not specified."}},
	{errInvalidHeader, apiError{400, "InvalidHeaderValue", "The value for one of the HTTP headers is not in the correct format."}},
	{errInvalidQueryParam, apiError{400, "InvalidQueryParameterValue", "Value for one of the query parameters specified in the request URI is invalid."}},
	{errBodyTooLarge, apiError{413, "RequestBodyTooLarge", "The request body is too large and exceeds the maximum permissible limit."}},
	{errXMethodNotUsingPost, apiError{400, "XMethodNotUsingPost", "The request uses X-HTTP-Method with an HTTP verb other than POST."}},
	{errXMethodIncorrectValue, apiError{400, "XMethodIncorrectValue", "The specified X-HTTP-Method is invalid."}},
	{errXMethodIncorrectCount, apiError{400, "XMethodIncorrectCount", "More than one X-HTTP-Method is specified."}},
	{errBatchPartitions, apiError{400, "CommandsInBatchActOnDifferentPartitions", "All commands in a batch must operate on same entity group."}},
	{errBatchDuplicate, apiError{400, "InvalidDuplicateRow", "The batch request contains multiple changes with same row key. An entity can appear only once in a batch request."}},
	{errCorsPreflight, apiError{403, "CorsPreflightFailure", "CORS not enabled or no matching rule found for this request."}},
	{errAuthorizationFailure, apiError{403, "AuthorizationFailure", msgAuthorizationFailure}},
	{errPermissionMismatch, apiError{403, "AuthorizationPermissionMismatch", msgPermissionMismatch}},
	{errProtocolMismatch, apiError{403, "AuthorizationProtocolMismatch", "This request is not authorized to perform this operation using this protocol."}},
	{errSourceIPMismatch, apiError{403, "AuthorizationSourceIPMismatch", "This request is not authorized to perform this operation using this source IP."}},
	{errServiceMismatch, apiError{403, "AuthorizationServiceMismatch", "This request is not authorized to perform this operation using this service."}},
	{errResourceTypeMismatch, apiError{403, "AuthorizationResourceTypeMismatch", msgResourceTypeMismatch}},
	{errInvalidXMLDocument, apiError{400, "InvalidXmlDocument", "XML specified is not syntactically valid."}},
	{errInvalidXMLNodeValue, apiError{400, "InvalidXmlNodeValue", "The value for one of the XML nodes is not in the correct format."}},
	{errMissingQueryParam, apiError{400, "MissingRequiredQueryParameter", "A query parameter that's mandatory for this request is not specified."}},
}

var internalError = apiError{500, "InternalError", "The server encountered an internal error. Please retry the request."}

// lookupError maps err to its Azure error and the client-facing detail, if
// any. Errors not in the table are bugs and become 500 InternalError.
func lookupError(err error) (apiError, string, bool) {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.apiError, errorDetail(err), true
		}
	}
	return internalError, "", false
}

func errorDetail(err error) string {
	var de *odata.DetailError
	if errors.As(err, &de) {
		return de.Detail
	}
	var ae *authError
	if errors.As(err, &ae) {
		return ae.detail
	}
	return ""
}

// errorMessage is the message value Azure writes: the message, then the
// request id and time on their own lines.
func errorMessage(msg, requestID string, now int64) string {
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString("\nRequestId:")
	b.WriteString(requestID)
	b.WriteString("\nTime:")
	b.Write(odata.AppendDateTime(nil, now, true))
	return b.String()
}

// appendJSONError appends the compact one-line odata.error body, with
// code and message only, as Azure writes it; a failed batch operation's
// message starts with its "N:" index.
func appendJSONError(dst []byte, code, message string) []byte {
	dst = append(dst, `{"odata.error":{"code":`...)
	dst = odata.AppendJSONString(dst, code)
	dst = append(dst, `,"message":{"lang":"en-US","value":`...)
	dst = odata.AppendJSONString(dst, message)
	return append(dst, "}}}"...)
}

// appendXMLError appends the storage XML error body used by the XML
// operations (ACL, service properties).
func appendXMLError(dst []byte, code, message, authDetail string) []byte {
	dst = append(dst, `<?xml version="1.0" encoding="utf-8"?><Error><Code>`...)
	dst = appendXMLText(dst, code)
	dst = append(dst, "</Code><Message>"...)
	dst = appendXMLText(dst, message)
	dst = append(dst, "</Message>"...)
	if authDetail != "" {
		dst = append(dst, "<AuthenticationErrorDetail>"...)
		dst = appendXMLText(dst, authDetail)
		dst = append(dst, "</AuthenticationErrorDetail>"...)
	}
	return append(dst, "</Error>"...)
}

func appendXMLText(dst []byte, s string) []byte {
	for _, r := range s {
		switch r {
		case '<':
			dst = append(dst, "&lt;"...)
		case '>':
			dst = append(dst, "&gt;"...)
		case '&':
			dst = append(dst, "&amp;"...)
		default:
			dst = append(dst, string(r)...)
		}
	}
	return dst
}
