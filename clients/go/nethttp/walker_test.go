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

// A json body is sent as the file gives it: objects' members in the order
// written (a Go map has none), from JSON and YAML alike, in deny, fail_deny
// and a route's deny.
func TestDenyJSONKeepsTheFilesOrder(t *testing.T) {
	for _, tc := range []struct{ doc, deny, failDeny, route string }{
		{`{"deny": {"body": "json", "json": {"status": 429, "code": "rate_limit:exceeded"}},
		   "fail_deny": {"body": "json", "json": [{"z": 1, "a": null}, "x"]},
		   "policies": [{"name": "p", "algorithm": "fixed", "limit": 1, "window": "1s"}],
		   "routes": [{"path": "/", "policies": ["p"], "deny": {"json": {"b": 1.0, "a": {"d": true, "c": "é<&>"}}}}]}`,
			`{"status":429,"code":"rate_limit:exceeded"}`, `[{"z":1,"a":null},"x"]`, `{"b":1,"a":{"d":true,"c":"é<&>"}}`},
		{"deny: {body: json, json: {status: 429, code: x}}\nfail_deny: {body: json, json: slow}\n" +
			"policies: [{name: p, algorithm: fixed, limit: 1, window: 1s}]\n" +
			"routes: [{path: /, policies: [p], deny: {json: {z: [2, 1], a: {y: 1, b: 2}}}}]\n",
			`{"status":429,"code":"x"}`, `"slow"`, `{"z":[2,1],"a":{"y":1,"b":2}}`},
	} {
		doc, err := Bytes([]byte(tc.doc)).document()
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig(doc, Resolvers{})
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []struct{ got, want string }{
			{string(c.deny.json), tc.deny}, {string(c.failDeny.json), tc.failDeny}, {string(c.routes[0].deny.json), tc.route},
		} {
			if got.got != got.want {
				t.Errorf("%s, want %s", got.got, got.want)
			}
		}
	}
}
