package iwarp

import (
	"errors"
	"fmt"
)

// ErrNeedMore reports that the input is a valid prefix of a frame but ends
// before the frame does. It is not a protocol fault: read more and retry.
var ErrNeedMore = errors.New("iwarp: need more bytes")

// Error is a protocol fault, classified as a Terminate message would carry
// it. Msg says precisely what was wrong.
type Error struct {
	Layer Layer
	Type  uint8
	Code  uint8
	Msg   string
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = codeName(e.Layer, e.Type, e.Code)
	}
	return "iwarp: " + e.Layer.String() + ": " + msg
}

// Is makes errors.Is(err, &Error{Layer: l, Type: t, Code: c}) match any
// fault with that classification, whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Layer == e.Layer && t.Type == e.Type && t.Code == e.Code
}

// Name is the RFC's name for the fault's classification.
func (e *Error) Name() string { return codeName(e.Layer, e.Type, e.Code) }

func mpaErr(code uint8, format string, args ...any) *Error {
	return &Error{Layer: LayerMPA, Type: MPAErrType, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func ddpErr(typ, code uint8, format string, args ...any) *Error {
	return &Error{Layer: LayerDDP, Type: typ, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func rdmapErr(typ, code uint8, format string, args ...any) *Error {
	return &Error{Layer: LayerRDMAP, Type: typ, Code: code, Msg: fmt.Sprintf(format, args...)}
}
