package protocol

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxNestingDepth is encoding/json's limit on nested arrays and objects.
const maxNestingDepth = 10000

// validJSON reports whether data is exactly one JSON value, with the same verdict as
// json.Valid (a fuzz test compares them) at several times its speed. Like json.Valid it does
// not check that strings are valid UTF-8.
func validJSON(data []byte) bool {
	var stackBuf [64]byte
	stack := stackBuf[:0]
	n := len(data)
	i := 0
	var ok bool
value:
	i = skipWS(data, i)
	if i >= n {
		return false
	}
	switch data[i] {
	case '{':
		if len(stack) >= maxNestingDepth {
			return false
		}
		i = skipWS(data, i+1)
		if i < n && data[i] == '}' {
			i++
			goto end
		}
		stack = append(stack, '{')
		goto key
	case '[':
		if len(stack) >= maxNestingDepth {
			return false
		}
		i = skipWS(data, i+1)
		if i < n && data[i] == ']' {
			i++
			goto end
		}
		stack = append(stack, '[')
		goto value
	case '"':
		if i, ok = scanStr(data, i); !ok {
			return false
		}
	case 't':
		if !bytes.HasPrefix(data[i:], []byte("true")) {
			return false
		}
		i += 4
	case 'f':
		if !bytes.HasPrefix(data[i:], []byte("false")) {
			return false
		}
		i += 5
	case 'n':
		if !bytes.HasPrefix(data[i:], []byte("null")) {
			return false
		}
		i += 4
	default:
		if i, ok = scanNum(data, i); !ok {
			return false
		}
	}
end:
	i = skipWS(data, i)
	if len(stack) == 0 {
		return i == n
	}
	if i >= n {
		return false
	}
	switch top := stack[len(stack)-1]; data[i] {
	case ',':
		i++
		if top == '{' {
			goto key
		}
		goto value
	case '}':
		if top != '{' {
			return false
		}
	case ']':
		if top != '[' {
			return false
		}
	default:
		return false
	}
	stack = stack[:len(stack)-1]
	i++
	goto end
key:
	i = skipWS(data, i)
	if i >= n || data[i] != '"' {
		return false
	}
	if i, ok = scanStr(data, i); !ok {
		return false
	}
	i = skipWS(data, i)
	if i >= n || data[i] != ':' {
		return false
	}
	i++
	goto value
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// strStop[c] is true for bytes that end the fast run of a string: '"', '\\' and controls.
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// scanStr checks the string token starting at data[i] == '"' and returns the index after it.
func scanStr(data []byte, i int) (int, bool) {
	n := len(data)
	i++
	for i < n {
		c := data[i]
		if !strStop[c] {
			i++
			continue
		}
		switch c {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= n {
				return 0, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > n || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default:
			return 0, false
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNum checks the number token starting at data[i] and returns the index after it.
func scanNum(data []byte, i int) (int, bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return 0, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i++; i < n && isDigit(data[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < n && data[i] == '.' {
		i++
		if i >= n || !isDigit(data[i]) {
			return 0, false
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || !isDigit(data[i]) {
			return 0, false
		}
		for i < n && isDigit(data[i]) {
			i++
		}
	}
	return i, true
}

// unquote appends the decoded content of a valid string token (without its quotes) to dst,
// exactly as encoding/json decodes it: escapes resolved, unpaired surrogates and invalid UTF-8
// replaced with U+FFFD.
func unquote(dst, s []byte) []byte {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			i = len(s)
		}
		dst = appendUTF8(dst, s[:i])
		s = s[i:]
		if len(s) < 2 {
			return dst
		}
		switch c := s[1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := getu4(s)
			if r < 0 {
				return dst
			}
			s = s[6:]
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, getu4(s)); dec != unicode.ReplacementChar {
					r = dec
					s = s[6:]
				} else {
					r = unicode.ReplacementChar
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		s = s[2:]
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// appendUTF8 appends b with invalid UTF-8 sequences replaced by U+FFFD.
func appendUTF8(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return append(dst, b...)
	}
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}
