package ollamatest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// GGUF metadata value types (the GGUF specification, versions 2 and 3).
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufStr
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// setUint32 returns a copy of the GGUF file b whose metadata key, a uint32, holds v (the
// value is overwritten in place, so tensor offsets do not move). It fails when b is not GGUF
// version 2 or 3, or key is missing or not a uint32.
func setUint32(b []byte, key string, v uint32) ([]byte, error) {
	r := bytes.NewReader(b)
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("gguf header: %w", err)
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 || hdr.Version > 3 {
		return nil, fmt.Errorf("not a GGUF v2/v3 file (magic %q, version %d)", hdr.Magic[:], hdr.Version)
	}
	for range hdr.KVs {
		k, err := ggufString(r)
		if err != nil {
			return nil, fmt.Errorf("gguf key: %w", err)
		}
		var typ uint32
		if err := binary.Read(r, binary.LittleEndian, &typ); err != nil {
			return nil, err
		}
		if k == key {
			if typ != ggufUint32 {
				return nil, fmt.Errorf("gguf %s has type %d, want uint32", key, typ)
			}
			at := len(b) - r.Len()
			out := bytes.Clone(b)
			binary.LittleEndian.PutUint32(out[at:], v)
			return out, nil
		}
		if err := ggufSkip(r, typ); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", k, err)
		}
	}
	return nil, fmt.Errorf("gguf has no %s", key)
}

// ggufString reads a GGUF string: a uint64 length and its bytes.
func ggufString(r *bytes.Reader) (string, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return "", err
	}
	if n > uint64(r.Len()) {
		return "", errors.New("string longer than the file")
	}
	s := make([]byte, n)
	_, err := io.ReadFull(r, s)
	return string(s), err
}

// ggufSkip reads past one value of type typ.
func ggufSkip(r *bytes.Reader, typ uint32) error {
	size := map[uint32]int64{ggufUint8: 1, ggufInt8: 1, ggufBool: 1, ggufUint16: 2, ggufInt16: 2,
		ggufUint32: 4, ggufInt32: 4, ggufFloat32: 4, ggufUint64: 8, ggufInt64: 8, ggufFloat64: 8}
	switch typ {
	case ggufStr:
		_, err := ggufString(r)
		return err
	case ggufArray:
		var et uint32
		var n uint64
		if err := binary.Read(r, binary.LittleEndian, &et); err != nil {
			return err
		}
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return err
		}
		if sz, ok := size[et]; ok {
			if n > uint64(r.Len())/uint64(sz) {
				return errors.New("array longer than the file")
			}
			_, err := r.Seek(int64(n)*sz, io.SeekCurrent)
			return err
		}
		for range n {
			if err := ggufSkip(r, et); err != nil {
				return err
			}
		}
		return nil
	}
	sz, ok := size[typ]
	if !ok {
		return fmt.Errorf("unknown value type %d", typ)
	}
	if sz > int64(r.Len()) {
		return io.ErrUnexpectedEOF
	}
	_, err := r.Seek(sz, io.SeekCurrent)
	return err
}
