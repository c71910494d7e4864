package iwarp

import "github.com/klauspost/crc32"

// castagnoli is built once; klauspost/crc32 recognises this table and uses
// SSE4.2 / CLMUL (or the platform's equivalent) for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli, the iSCSI digest of RFC 3720 §12.1)
// of b: reflected, initial value 0xFFFFFFFF, final XOR 0xFFFFFFFF. MPA sends
// this value little-endian (RFC 5044 §4.4, checked against its Fig.5 and
// Fig.6).
func CRC32C(b []byte) uint32 {
	return updateCRC32C(0, b)
}

// UpdateCRC32C continues crc, the CRC32C of some earlier bytes, over b, so
// that UpdateCRC32C(CRC32C(a), b) == CRC32C(a||b).
func UpdateCRC32C(crc uint32, b []byte) uint32 {
	return updateCRC32C(crc, b)
}
