package limits

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxTenantLen is the longest tenant (gate.WithTenant), in bytes: a tenant
// is stored in its upstream's line while its caller waits, and may be a
// metric label.
const MaxTenantLen = 256

// CheckTenant refuses a tenant a client could use to grow the line's keys
// or a metric label, or to put a control byte in a log line: over
// MaxTenantLen bytes, not UTF-8, or containing a control character.
func CheckTenant(t string) error {
	switch {
	case len(t) > MaxTenantLen:
		return fmt.Errorf("tenant of %d bytes, over the %d-byte limit", len(t), MaxTenantLen)
	case !utf8.ValidString(t):
		return errors.New("tenant is not UTF-8")
	}
	for _, r := range t {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errors.New("tenant contains a control character")
		}
	}
	return nil
}
