package store

// Net events: field numbers 64–127. They are on disk in every store (see
// the format in codec.go): never change or reuse one; a new field takes
// the next number and becomes netKnown.
const (
	fNetDomain              = 64
	fNetIP                  = 65
	fNetPort                = 66
	fNetSrcIP               = 67
	fNetSrcPort             = 68
	fNetTransport           = 69
	fNetConnType            = 70
	fNetDecision            = 71
	fNetReason              = 72
	fNetMatchedRule         = 73
	fNetMethod              = 74
	fNetPath                = 75
	fNetQuery               = 76
	fNetStatusCode          = 77
	fNetBytesSent           = 78
	fNetBytesReceived       = 79
	fNetDuration            = 80 // nanoseconds
	fNetRequestHeader       = 81 // repeated: uvarint len(name), name, value
	fNetResponseHeader      = 82 // repeated
	fNetRequestBodyPreview  = 83
	fNetResponseBodyPreview = 84
	fNetCount               = 85
	fNetDetail              = 86
	fNetHTTPVersion         = 87 // added with HTTP/3: older records have none and read as ""
	fNetDirection           = 88 // added with published ports: older records have none and read as ""
)

// The Net block (lo inclusive, hi exclusive) and the highest number this
// build knows in it.
const netLo, netHi, netKnown = 64, 128, fNetDirection

var connTypes = []ConnType{ConnTCP, ConnTLS, ConnHTTPS, ConnHTTP, ConnQUIC}

var httpVersions = []string{HTTP11, HTTP2, HTTP3, HTTP10}

var directions = []Direction{Outbound, Inbound}

func (n *Net) appendTo(b []byte) []byte {
	b = appendString(b, fNetDomain, n.Domain)
	b = appendAddr(b, fNetIP, n.IP)
	b = appendUint(b, fNetPort, uint64(n.Port))
	b = appendAddr(b, fNetSrcIP, n.SrcIP)
	b = appendUint(b, fNetSrcPort, uint64(n.SrcPort))
	b = appendString(b, fNetTransport, string(n.Transport))
	b = appendString(b, fNetConnType, string(n.ConnType))
	b = appendString(b, fNetDecision, string(n.Decision))
	b = appendString(b, fNetReason, n.Reason)
	b = appendString(b, fNetMatchedRule, n.MatchedRule)
	b = appendString(b, fNetMethod, n.Method)
	b = appendString(b, fNetPath, n.Path)
	b = appendString(b, fNetQuery, n.Query)
	b = appendInt(b, fNetStatusCode, int64(n.StatusCode))
	b = appendInt(b, fNetBytesSent, n.BytesSent)
	b = appendInt(b, fNetBytesReceived, n.BytesReceived)
	b = appendInt(b, fNetDuration, int64(n.Duration))
	b = appendHeaders(b, fNetRequestHeader, n.RequestHeaders)
	b = appendHeaders(b, fNetResponseHeader, n.ResponseHeaders)
	b = appendString(b, fNetRequestBodyPreview, n.RequestBodyPreview)
	b = appendString(b, fNetResponseBodyPreview, n.ResponseBodyPreview)
	b = appendInt(b, fNetCount, n.Count)
	b = appendString(b, fNetDetail, n.Detail)
	b = appendString(b, fNetHTTPVersion, n.HTTPVersion)
	b = appendString(b, fNetDirection, string(n.Direction))
	return b
}

func (n *Net) setField(f field) error {
	switch f.num {
	case fNetDomain:
		return setString(&f, &n.Domain)
	case fNetIP:
		return setAddr(&f, &n.IP)
	case fNetPort:
		return setPort(&f, &n.Port)
	case fNetSrcIP:
		return setAddr(&f, &n.SrcIP)
	case fNetSrcPort:
		return setPort(&f, &n.SrcPort)
	case fNetTransport:
		return setIntern(&f, &n.Transport, transports)
	case fNetConnType:
		return setIntern(&f, &n.ConnType, connTypes)
	case fNetDecision:
		return setIntern(&f, &n.Decision, decisions)
	case fNetReason:
		return setString(&f, &n.Reason)
	case fNetMatchedRule:
		return setString(&f, &n.MatchedRule)
	case fNetMethod:
		return setIntern(&f, &n.Method, methods)
	case fNetPath:
		return setString(&f, &n.Path)
	case fNetQuery:
		return setString(&f, &n.Query)
	case fNetStatusCode:
		return setInt(&f, &n.StatusCode)
	case fNetBytesSent:
		return setInt(&f, &n.BytesSent)
	case fNetBytesReceived:
		return setInt(&f, &n.BytesReceived)
	case fNetDuration:
		return setInt(&f, &n.Duration)
	case fNetRequestHeader:
		return addHeader(&f, &n.RequestHeaders)
	case fNetResponseHeader:
		return addHeader(&f, &n.ResponseHeaders)
	case fNetRequestBodyPreview:
		return setString(&f, &n.RequestBodyPreview)
	case fNetResponseBodyPreview:
		return setString(&f, &n.ResponseBodyPreview)
	case fNetCount:
		return setInt(&f, &n.Count)
	case fNetDetail:
		return setString(&f, &n.Detail)
	case fNetHTTPVersion:
		return setIntern(&f, &n.HTTPVersion, httpVersions)
	case fNetDirection:
		return setIntern(&f, &n.Direction, directions)
	}
	return nil
}
