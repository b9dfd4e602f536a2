package nethttp

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The configuration's walker (docs/http.md, Start-up validation): reads a
// document with the schema's tree (schema_gen.go, generated from
// conformance/schema/config.schema.json) and checks every field's name,
// kind, enum, bounds, pattern and duration, filling in the defaults. Its
// messages are conformance/README.md's templates. The rules that span
// fields are configuration.go's.

// walked is an object as the walker read it: each present or defaulted
// field's value, a string, an int64, a bool, a duration in ms (int64), a
// rateValue, an int64 or string (int-or-string), a []any, a walked, a
// map[string]any (a map field) or any JSON value (a json field).
type walked map[string]any

// rateValue is a rate field, read.
type rateValue struct{ limit, ms int64 }

var (
	patternsMu sync.Mutex
	patterns   = map[string]*regexp.Regexp{}
)

func pattern(source string) *regexp.Regexp {
	patternsMu.Lock()
	defer patternsMu.Unlock()
	re, ok := patterns[source]
	if !ok {
		// The generator emits only patterns Go's regexp compiles (a test
		// compiles every one); a new one that does not is a build-time bug.
		re = regexp.MustCompile(source)
		patterns[source] = re
	}
	return re
}

// walkDocument reads the whole document, its fields with their defaults.
func walkDocument(doc any) (walked, error) {
	return walkObject("(document)", "", doc, schemaRoot)
}

// walkField reads one field of one of the schema's objects as the walker
// reads it in a document (a rate or a duration outside a document: the
// vectors').
func walkField(path string, value any, object, name string) (any, error) {
	for i := range schemaObjects[object] {
		if f := &schemaObjects[object][i]; f.Name == name {
			return walk(path, value, f)
		}
	}
	panic("nethttp: the generated schema's " + object + " has no field " + name)
}

func walkObject(where, prefix string, value any, object string) (walked, error) {
	m, ok := asObject(value)
	if !ok {
		return nil, bad(where, "must be an object")
	}
	fields := schemaObjects[object]
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names) // one message for one document, whatever the map's order
	for _, k := range names {
		if !hasField(fields, k) {
			return nil, bad(prefix+k, "unknown field")
		}
	}
	out := walked{}
	for i := range fields {
		f := &fields[i]
		path := prefix + f.Name
		given, present := m[f.Name]
		switch {
		case present:
			v, err := walk(path, given, f)
			if err != nil {
				return nil, err
			}
			out[f.Name] = v
		case f.Required:
			return nil, bad(path, "missing")
		case f.Default != "":
			var def any
			if err := json.Unmarshal([]byte(f.Default), &def); err != nil {
				panic("nethttp: the generated schema's default for " + path + " is not JSON: " + f.Default)
			}
			v, err := walk(path, def, f)
			if err != nil {
				panic("nethttp: the generated schema's default for " + path + " is refused: " + err.Error())
			}
			out[f.Name] = v
		}
	}
	return out, nil
}

func hasField(fields []schemaField, name string) bool {
	for i := range fields {
		if fields[i].Name == name {
			return true
		}
	}
	return false
}

// asObject: a JSON object, or a YAML mapping (whose keys may be other
// than strings: they are written as text, and are then unknown fields).
func asObject(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case walked:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[fmt.Sprint(k)] = x
		}
		return out, true
	}
	return nil, false
}

func walk(path string, value any, f *schemaField) (any, error) {
	switch f.Kind {
	case schemaString:
		return walkString(path, value, f)
	case schemaInteger:
		if n, ok := integerWithin(value, f); ok {
			return n, nil
		}
		return nil, bad(path, "must be an integer from %d to %d", f.Minimum, f.Maximum)
	case schemaBoolean:
		if b, ok := value.(bool); ok {
			return b, nil
		}
		return nil, bad(path, "must be true or false")
	case schemaDuration:
		if ms, ok := durationOf(value); ok && ms >= f.DurationMinMS && ms <= f.DurationMaxMS {
			return ms, nil
		}
		return nil, bad(path, "must be a duration from %d ms to %d ms (an integer and ms, s, m, h or d; seconds without a unit)",
			f.DurationMinMS, f.DurationMaxMS)
	case schemaRate:
		if s, ok := value.(string); ok && matches(s, f) {
			limit, ms, ok := parseRate(s)
			if ok && limit >= f.Minimum && limit <= f.Maximum && ms >= f.DurationMinMS && ms <= f.DurationMaxMS {
				return rateValue{limit, ms}, nil
			}
		}
		return nil, bad(path, "must be a rate: a count from %d to %d per a period from %d ms to %d ms (100/minute, 5 per 10s, 3/1500ms)",
			f.Minimum, f.Maximum, f.DurationMinMS, f.DurationMaxMS)
	case schemaIntOrString:
		if n, ok := integerWithin(value, f); ok {
			return n, nil
		}
		if s, ok := value.(string); ok && matches(s, f) {
			return s, nil
		}
		return nil, bad(path, "must be %s", expected(f))
	case schemaList:
		list, ok := value.([]any)
		if !ok {
			return nil, bad(path, "must be a list")
		}
		if len(list) < f.MinItems {
			return nil, bad(path, "must not be empty")
		}
		out := make([]any, len(list))
		for i, item := range list {
			v, err := walk(fmt.Sprintf("%s[%d]", path, i), item, f.Items)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case schemaObject:
		return walkObject(path, path+".", value, f.Object)
	case schemaMap:
		return walkMap(path, value, f)
	case schemaJson:
		if value == nil {
			return nil, bad(path, "must be %s", expected(f))
		}
		return value, nil
	}
	panic(fmt.Sprintf("nethttp: the generated schema has a kind %d this walker does not know", f.Kind))
}

// walkMap reads an object whose names the document chooses (identities,
// a refusal's headers): each name matches the field's KeyPattern, each
// value is walked as its Items; a map[string]any.
func walkMap(path string, value any, f *schemaField) (map[string]any, error) {
	m, ok := asObject(value)
	if !ok {
		return nil, bad(path, "must be an object")
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names) // one message for one document, whatever the map's order
	out := make(map[string]any, len(m))
	for _, name := range names {
		at := path + "." + name
		if !pattern(f.KeyPattern).MatchString(name) {
			return nil, bad(at, "must be %s", f.KeyExpected)
		}
		v, err := walk(at, m[name], f.Items)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

func walkString(path string, value any, f *schemaField) (string, error) {
	s, isString := value.(string)
	if len(f.Choices) > 0 {
		for _, c := range f.Choices {
			if isString && s == c {
				return s, nil
			}
		}
		return "", bad(path, "must be one of %s", strings.Join(f.Choices, ", "))
	}
	if isString && matches(s, f) {
		return s, nil
	}
	return "", bad(path, "must be %s", expected(f))
}

func expected(f *schemaField) string {
	if f.Expected == "" {
		return "a string"
	}
	return f.Expected
}

// matches: the field's pattern (searched for: the schema anchors its
// patterns) and its lengths, in bytes (Go strings are UTF-8 bytes).
func matches(s string, f *schemaField) bool {
	if f.Pattern != "" && !pattern(f.Pattern).MatchString(s) {
		return false
	}
	return len(s) >= f.MinLength && (f.MaxLength == 0 || len(s) <= f.MaxLength)
}

// integerWithin: a number whose value is whole (5 and 5.0 alike; a
// boolean is none), within the field's bounds.
func integerWithin(v any, f *schemaField) (int64, bool) {
	n, ok := wholeNumber(v)
	return n, ok && n >= f.Minimum && n <= f.Maximum
}

// wholeNumber reads a number of the document (YAML's int, int64, uint64
// and float64, JSON's float64 or json.Number, a Config's int64) whose
// value is whole; values past int64 are clamped to its ends, outside every
// bound.
func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		return int64(min(x, math.MaxInt64)), true
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return clampFloat(x), true
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n, true
		}
		f, err := x.Float64()
		if err != nil {
			return 0, false // past float64 too: no bound reaches it
		}
		return wholeNumber(f)
	}
	return 0, false
}

func clampFloat(x float64) int64 {
	switch {
	case x >= math.MaxInt64:
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	return int64(x)
}
