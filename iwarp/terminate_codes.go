package iwarp

import "fmt"

// Every Terminate classification (Layer, EType, Error Code) the stack sends
// or names is defined here and nowhere else, so that a fault path names its
// code and never writes a number. The values are the RFC tables':
//
//   - Layer 0 (RDMAP): RFC 5040 §4.8, the Terminate Control table;
//   - Layer 1 (DDP): RFC 5041 §7.2;
//   - Layer 2 (LLP, MPA over TCP): RFC 5044 §8 (codes 1 to 4) and RFC 6581
//     §8, which adds codes 5, 6 and 7;
//
// all three as registered with IANA by RFC 6580 §3 (the RDDP registries;
// RFC 6581 §11 adds MPA codes 5 to 7).
// terminate_codes_test.go holds those tables as the RFCs print them and
// checks every constant and every fault path against them.

// Layer is the Layer field of a Terminate message (RFC 5040 §4.8): the
// protocol layer that detected a fault.
type Layer uint8

// Terminate layers. RFC 5040 calls layer 2 the LLP; over TCP that is MPA.
const (
	LayerRDMAP Layer = 0
	LayerDDP   Layer = 1
	LayerMPA   Layer = 2
)

func (l Layer) String() string {
	switch l {
	case LayerRDMAP:
		return "RDMAP"
	case LayerDDP:
		return "DDP"
	case LayerMPA:
		return "MPA"
	}
	return fmt.Sprintf("Layer(%d)", uint8(l))
}

// RDMAP error types and codes (RFC 5040 §4.8, Layer 0). The two remote
// error types share one code space but each allows only part of it: a
// remote protection error takes 0x00-0x04, 0x09 and 0xFF, a remote
// operation error 0x05-0x09 and 0xFF. A local catastrophic error carries
// any code; the stack sends 0xFF, as Linux siw does.
const (
	RDMAPErrTypeCatastrophic uint8 = 0 // local catastrophic error
	RDMAPErrTypeProtection   uint8 = 1 // remote protection error
	RDMAPErrTypeOperation    uint8 = 2 // remote operation error

	RDMAPErrInvalidSTag        uint8 = 0x00
	RDMAPErrBaseBounds         uint8 = 0x01
	RDMAPErrAccessRights       uint8 = 0x02
	RDMAPErrSTagNotAssoc       uint8 = 0x03
	RDMAPErrTOWrap             uint8 = 0x04
	RDMAPErrVersion            uint8 = 0x05
	RDMAPErrOpcode             uint8 = 0x06
	RDMAPErrCatastrophicStream uint8 = 0x07
	RDMAPErrCatastrophicGlobal uint8 = 0x08
	RDMAPErrCannotInvalidate   uint8 = 0x09
	RDMAPErrUnspecified        uint8 = 0xFF
)

// DDP error types and codes (RFC 5041 §7.2, Layer 1). A tagged and an
// untagged buffer error number the same values differently.
const (
	DDPErrTypeCatastrophic uint8 = 0
	DDPErrTypeTagged       uint8 = 1 // tagged buffer error
	DDPErrTypeUntagged     uint8 = 2 // untagged buffer error

	// Local catastrophic error: the only code is 0.
	DDPErrCatastrophic uint8 = 0x00

	// Tagged buffer errors.
	DDPErrInvalidSTag   uint8 = 0x00
	DDPErrBaseBounds    uint8 = 0x01
	DDPErrSTagNotAssoc  uint8 = 0x02
	DDPErrTOWrap        uint8 = 0x03
	DDPErrTaggedVersion uint8 = 0x04
	// Untagged buffer errors.
	DDPErrInvalidQN       uint8 = 0x01
	DDPErrNoBuffer        uint8 = 0x02 // invalid MSN: no buffer available
	DDPErrMSNRange        uint8 = 0x03 // invalid MSN: MSN range is not valid
	DDPErrInvalidMO       uint8 = 0x04
	DDPErrTooLong         uint8 = 0x05 // message too long for available buffer
	DDPErrUntaggedVersion uint8 = 0x06
)

// MPA error codes (RFC 5044 §8 and RFC 6581 §8, registered by RFC 6580 §3.3
// and RFC 6581 §11: Layer 2, error type 0).
const (
	MPAErrType uint8 = 0

	MPAErrTCPLost           uint8 = 1 // TCP connection closed, terminated or lost
	MPAErrCRC               uint8 = 2 // received MPA CRC does not match
	MPAErrMarker            uint8 = 3 // marker and ULPDU_Length field mismatch
	MPAErrReqRep            uint8 = 4 // invalid MPA Request or Reply frame
	MPAErrLocalCatastrophic uint8 = 5
	MPAErrInsufficientIRD   uint8 = 6
	MPAErrNoMatchingRTR     uint8 = 7
)

// codeName returns the RFC 5040 / RFC 6581 description of a classification.
func codeName(l Layer, typ, code uint8) string {
	switch l {
	case LayerMPA:
		if typ == MPAErrType {
			switch code {
			case MPAErrTCPLost:
				return "TCP connection closed, terminated or lost"
			case MPAErrCRC:
				return "received MPA CRC does not match the calculated value"
			case MPAErrMarker:
				return "received MPA marker and ULPDU_Length field mismatch"
			case MPAErrReqRep:
				return "invalid MPA Request or Reply frame"
			case MPAErrLocalCatastrophic:
				return "local catastrophic error"
			case MPAErrInsufficientIRD:
				return "insufficient IRD resources"
			case MPAErrNoMatchingRTR:
				return "no matching RTR model"
			}
		}
	case LayerDDP:
		switch typ {
		case DDPErrTypeCatastrophic:
			return "local catastrophic error"
		case DDPErrTypeTagged:
			switch code {
			case DDPErrInvalidSTag:
				return "tagged buffer: invalid STag"
			case DDPErrBaseBounds:
				return "tagged buffer: base or bounds violation"
			case DDPErrSTagNotAssoc:
				return "tagged buffer: STag not associated with DDP stream"
			case DDPErrTOWrap:
				return "tagged buffer: TO wrap"
			case DDPErrTaggedVersion:
				return "tagged buffer: invalid DDP version"
			}
		case DDPErrTypeUntagged:
			switch code {
			case DDPErrInvalidQN:
				return "untagged buffer: invalid QN"
			case DDPErrNoBuffer:
				return "untagged buffer: invalid MSN, no buffer available"
			case DDPErrMSNRange:
				return "untagged buffer: invalid MSN, MSN range is not valid"
			case DDPErrInvalidMO:
				return "untagged buffer: invalid MO"
			case DDPErrTooLong:
				return "untagged buffer: DDP message too long for available buffer"
			case DDPErrUntaggedVersion:
				return "untagged buffer: invalid DDP version"
			}
		}
	case LayerRDMAP:
		switch typ {
		case RDMAPErrTypeCatastrophic:
			return "local catastrophic error"
		case RDMAPErrTypeProtection, RDMAPErrTypeOperation:
			prefix := "remote protection error: "
			if typ == RDMAPErrTypeOperation {
				prefix = "remote operation error: "
			}
			switch code {
			case RDMAPErrInvalidSTag:
				return prefix + "invalid STag"
			case RDMAPErrBaseBounds:
				return prefix + "base or bounds violation"
			case RDMAPErrAccessRights:
				return prefix + "access rights violation"
			case RDMAPErrSTagNotAssoc:
				return prefix + "STag not associated with RDMAP stream"
			case RDMAPErrTOWrap:
				return prefix + "TO wrap"
			case RDMAPErrVersion:
				return prefix + "invalid RDMAP version"
			case RDMAPErrOpcode:
				return prefix + "unexpected opcode"
			case RDMAPErrCatastrophicStream:
				return prefix + "catastrophic error, localized to RDMAP stream"
			case RDMAPErrCatastrophicGlobal:
				return prefix + "catastrophic error, global"
			case RDMAPErrCannotInvalidate:
				return prefix + "STag cannot be invalidated"
			case RDMAPErrUnspecified:
				return prefix + "unspecified error"
			}
		}
	}
	return fmt.Sprintf("error type %d code %#x", typ, code)
}
