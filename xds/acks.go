package xds

import (
	"strconv"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// ackState is what a watch sent and what its client answered, guarded by
// client.mu. pushes counts the responses sent on the watch; the count is
// the latest one's version_info (lastVersion), and lastNonce its nonce.
// acked is the latest version the client ACKed, nack its latest
// rejection.
type ackState struct {
	pushes      uint64
	lastNonce   string
	lastVersion string
	acked       string
	nack        *NACKStatus
}

// record counts a response sent with the stream's nonce.
func (a *ackState) record(nonce uint64) {
	a.pushes++
	a.lastNonce = strconv.FormatUint(nonce, 10)
	a.lastVersion = strconv.FormatUint(a.pushes, 10)
}

// answerSotW records what a SotW request says of the latest response of
// its type: an ACK or a NACK. A request carrying an older nonce is stale
// and changes nothing. latest reports that it answered the latest
// response; nack is the rejection it recorded, if it is one.
func (a *ackState) answerSotW(req *discoveryv3.DiscoveryRequest) (latest bool, nack *NACKStatus) {
	n := req.GetResponseNonce()
	if n == "" || n != a.lastNonce {
		return false, nil
	}
	if req.GetErrorDetail() != nil {
		return true, a.reject(a.lastVersion, n, req.GetErrorDetail().GetMessage())
	}
	a.acked = req.GetVersionInfo()
	return true, nil
}

// answerDelta is answerSotW for a delta request, whose NACK of an older
// response (a nonce that is not the latest) is recorded too, without a
// version.
func (a *ackState) answerDelta(req *discoveryv3.DeltaDiscoveryRequest) (latest bool, nack *NACKStatus) {
	n := req.GetResponseNonce()
	if n == "" {
		return false, nil
	}
	ver := ""
	if n == a.lastNonce {
		ver = a.lastVersion
	}
	if req.GetErrorDetail() != nil {
		return ver != "", a.reject(ver, n, req.GetErrorDetail().GetMessage())
	}
	if ver != "" {
		a.acked = ver
	}
	return ver != "", nil
}

// reject records a NACK and returns it. The rejected content stays
// recorded as sent, so it is not re-sent to this client; the next
// different version is.
func (a *ackState) reject(version, nonce, msg string) *NACKStatus {
	n := 1
	if a.nack != nil {
		n = a.nack.Count + 1
	}
	a.nack = &NACKStatus{Version: version, Nonce: nonce, Error: msg, At: time.Now(), Count: n}
	return a.nack
}

// NACKStatus is a response a client rejected.
type NACKStatus struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
	// Count is how many NACKs of this type the stream sent so far.
	Count int `json:"count"`
}
