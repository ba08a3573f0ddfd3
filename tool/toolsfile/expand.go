package toolsfile

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} in s with the variable NAME from env and $$ with $. It
// returns the names of the variables that are not set (each once, in order) and
// an error for a malformed reference. The error never repeats an expanded value.
func expand(s string, env func(string) (string, bool)) (out string, unset []string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated ${ at byte %d", i)
			}
			name := s[i+2 : i+2+end]
			if !validVarName(name) {
				return "", nil,
					fmt.Errorf("${%s} is not a variable reference (names are letters, digits and _, not starting with a digit; write $$ for a literal $)",
						name)
			}
			v, ok := env(name)
			if !ok {
				if !contains(unset, name) {
					unset = append(unset, name)
				}
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), unset, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validVarName reports whether name is [A-Za-z_][A-Za-z0-9_]*.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
