package nethttp

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The generated tree (schema_gen.go) suits this walker: every pattern
// compiles in Go's regexp, every default is JSON the field accepts, and
// every object a field names exists; a schema change that breaks one
// fails here rather than at someone's start-up.
func TestSchemaTreeSuitsTheWalker(t *testing.T) {
	if _, ok := schemaObjects[schemaRoot]; !ok {
		t.Fatalf("no root object %q", schemaRoot)
	}
	var check func(where string, f *schemaField)
	check = func(where string, f *schemaField) {
		if f.Pattern != "" {
			if _, err := regexp.Compile(f.Pattern); err != nil {
				t.Errorf("%s: pattern %q: %v", where, f.Pattern, err)
			}
		}
		if f.Default != "" {
			var def any
			if err := json.Unmarshal([]byte(f.Default), &def); err != nil {
				t.Errorf("%s: default %q: %v", where, f.Default, err)
			} else if _, err := walk(where, def, f); err != nil {
				t.Errorf("%s: default %q refused: %v", where, f.Default, err)
			}
		}
		if f.Kind == schemaObject {
			if _, ok := schemaObjects[f.Object]; !ok {
				t.Errorf("%s: object %q is not in the tree", where, f.Object)
			}
		}
		if f.Items != nil {
			check(where+"[]", f.Items)
		}
	}
	for name, fields := range schemaObjects {
		for i := range fields {
			check(name+"."+fields[i].Name, &fields[i])
		}
	}
}

// A code:<name> value naming no registered resolver is refused naming its
// field, never read as a number or a mode (a limit read as an integer
// panicked).
func TestUnregisteredResolversAreRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct{ doc, field string }{
		{`{"policies":[{"name":"p","algorithm":"fixed","limit":"code:plan"}]}`, "policies[0].limit"},
		{`{"policies":[{"name":"p","algorithm":"concurrency","limit":"code:plan","lease":"60s"}]}`, "policies[0].limit"},
		{`{"policies":[{"name":"p","algorithm":"fixed","limit":5,"window":"60s","cost":"code:rows"}]}`, "policies[0].cost"},
		{`{"mode":"code:switch","policies":[{"name":"p","algorithm":"fixed","limit":5,"window":"60s"}]}`, "mode"},
	} {
		var doc any
		if err := json.Unmarshal([]byte(tc.doc), &doc); err != nil {
			t.Fatal(err)
		}
		_, err := parseConfig(doc, Resolvers{})
		if err == nil || !strings.Contains(err.Error(), tc.field+": ") {
			t.Errorf("%s: got %v, want an error naming %s", tc.doc, err, tc.field)
		}
	}
}
