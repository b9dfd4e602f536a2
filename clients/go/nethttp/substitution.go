package nethttp

import (
	"bytes"
	"os"
)

// Substitution (docs/http.md, Environment variables): ${VAR} and
// ${VAR:-default} in a configuration file's text, replaced before it is
// parsed; $${ is a literal ${. A Config struct is Go data and is not
// substituted.

// substitute replaces the references in text, looking variables up with
// lookup. An unset variable without a default is an error naming it; so is
// a reference that is not closed or whose name is not a variable's.
func substitute(text []byte, lookup func(string) (string, bool)) ([]byte, error) {
	if !bytes.Contains(text, []byte("${")) {
		return text, nil
	}
	var out []byte
	for {
		i := bytes.IndexByte(text, '$')
		if i < 0 || i+1 >= len(text) {
			return append(out, text...), nil
		}
		out = append(out, text[:i]...)
		rest := text[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("$${")):
			out = append(out, "${"...)
			text = rest[3:]
		case bytes.HasPrefix(rest, []byte("${")):
			end := bytes.IndexByte(rest, '}')
			if end < 0 {
				return nil, bad("${", "is not closed by }")
			}
			ref := string(rest[2:end])
			name, def, hasDefault := cutDefault(ref)
			if !variableName(name) {
				return nil, bad("${"+ref+"}", "%q is not a variable name (letters, digits and _, not starting with a digit)", name)
			}
			v, set := lookup(name)
			switch {
			case hasDefault && v == "":
				v = def
			case !set:
				return nil, bad("${"+name+"}", "not set")
			}
			out = append(out, v...)
			text = rest[end+1:]
		default:
			out = append(out, '$')
			text = rest[1:]
		}
	}
}

// cutDefault splits NAME:-default.
func cutDefault(ref string) (name, def string, ok bool) {
	for i := 0; i+1 < len(ref); i++ {
		if ref[i] == ':' && ref[i+1] == '-' {
			return ref[:i], ref[i+2:], true
		}
	}
	return ref, "", false
}

func variableName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// fromEnvironment substitutes the process's environment.
func fromEnvironment(text []byte) ([]byte, error) { return substitute(text, os.LookupEnv) }
