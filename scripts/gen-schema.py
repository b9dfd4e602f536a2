#!/usr/bin/env python3
"""Writes the configuration's schema as each language's native data.

conformance/schema/config.schema.json is the one source of every field's
name, kind, enum, default, bounds, pattern and duration bounds
(docs/contributing.md, The configuration schema and its generated code).
This script reads it and writes, for each language in OUTPUTS, a module
holding the same tree as that language's own constants, which the
language's small walker reads. Code generation rather than a JSON Schema
library at run time: no new dependency in four packages, the walker's
messages the same everywhere, and a new language is one more emitter.

A keyword this script does not know stops it: a schema change cannot go
silently unenforced. Stdlib only.

    scripts/gen-schema.py           write every generated file
    scripts/gen-schema.py --check   exit 1, naming each file that is stale
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "conformance/schema/config.schema.json"
SOURCE = "conformance/schema/config.schema.json"

# The one table of where each language's generated module goes.
OUTPUTS: Dict[str, str] = {
    "rust": "clients/rust/tower/src/schema.rs",
    "python": "clients/python/src/librl/http/_schema.py",
    "typescript": "clients/node/src/http/schema.ts",
    "go": "clients/go/nethttp/schema_gen.go",
    "java": "clients/java/integrations/http/src/main/java/io/librl/http/Schema.java",
}

KINDS = (
    "string", "integer", "boolean", "duration", "rate", "list", "object", "int-or-string", "map", "json",
)

# What each place in the schema may hold; anything else is refused.
TOP_KEYS = {
    "$schema", "$id", "title", "description", "x-librl-cross-field",
    "type", "additionalProperties", "required", "properties", "$defs",
}
OBJECT_KEYS = {"description", "type", "additionalProperties", "required", "properties", "allOf"}
FIELD_KEYS = {
    "description", "type", "enum", "default", "minimum", "maximum", "minLength",
    "maxLength", "minItems", "pattern", "items", "$ref", "oneOf",
    "x-librl-duration", "x-librl-rate", "x-librl-expected",
    # a map (an object of names the document chooses): its names and values
    "propertyNames", "additionalProperties",
    # beside the $ref of an object: that use's own defaults
    "properties",
}
# A map's names: a pattern and what a name that misses it is told.
NAME_KEYS = {"pattern", "x-librl-expected"}
# What an object's use beside its $ref may say of one of its fields.
OVERRIDE_KEYS = {"default", "description"}
# A json field: any JSON value but null (null is no field's value).
JSON_TYPES = ["object", "array", "string", "number", "boolean"]
# Inside a subschema marked x-librl-rule: a cross-field rule stated for
# validators, which the integrations check in code (never walked).
RULE_KEYS = {
    "x-librl-rule", "if", "then", "else", "not", "anyOf", "oneOf", "allOf",
    "required", "properties", "const", "type",
}
DURATION_KEYS = {"min_ms", "max_ms"}
RATE_KEYS = {"min_count", "max_count", "min_ms", "max_ms"}


class SchemaError(Exception):
    pass


@dataclass
class Field:
    name: str
    kind: str
    required: bool = False
    default: Optional[str] = None  # JSON text
    choices: Tuple[str, ...] = ()
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    pattern: Optional[str] = None
    min_length: Optional[int] = None
    max_length: Optional[int] = None
    min_items: Optional[int] = None
    items: Optional["Field"] = None
    object: Optional[str] = None
    duration_min_ms: Optional[int] = None
    duration_max_ms: Optional[int] = None
    expected: Optional[str] = None
    key_pattern: Optional[str] = None
    key_expected: Optional[str] = None


@dataclass
class Model:
    root: str
    objects: Dict[str, List[Field]] = field(default_factory=dict)
    rules: Dict[str, str] = field(default_factory=dict)


def unique_pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SchemaError(f"key {key!r} appears twice")
        out[key] = value
    return out


def refuse_unknown(where: str, node: Dict[str, Any], allowed: set[str]) -> None:
    for key in node:
        if key not in allowed:
            raise SchemaError(f"{where}: keyword {key!r} is unknown to scripts/gen-schema.py")


def check_rule(where: str, node: Any, rules: Dict[str, str]) -> None:
    """A cross-field rule stated for validators: only the validation
    keywords above, and its x-librl-rule naming a rule of the description."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            check_rule(f"{where}[{i}]", item, rules)
        return
    if not isinstance(node, dict):
        return
    refuse_unknown(where, node, RULE_KEYS)
    if "x-librl-rule" in node and node["x-librl-rule"] not in rules:
        raise SchemaError(f"{where}: x-librl-rule {node['x-librl-rule']!r} is not in x-librl-cross-field")
    for key, value in node.items():
        if key in ("properties",):
            for name, sub in value.items():
                check_rule(f"{where}.{name}", sub, rules)
        elif key in ("if", "then", "else", "not", "anyOf", "oneOf", "allOf"):
            check_rule(f"{where}.{key}", value, rules)


def bound(where: str, node: Dict[str, Any], key: str) -> Optional[int]:
    value = node.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise SchemaError(f"{where}: {key} must be a non-negative integer")
    return value


def ascii_text(where: str, text: str) -> str:
    if not text.isascii():
        raise SchemaError(f"{where}: generated strings are ASCII; {text!r} is not")
    return text


class Reader:
    def __init__(self, schema: Dict[str, Any]) -> None:
        self.schema = schema
        self.defs: Dict[str, Any] = schema.get("$defs", {})
        self.model = Model(root="config")

    def read(self) -> Model:
        s = self.schema
        refuse_unknown("(top)", s, TOP_KEYS)
        if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
            raise SchemaError("$schema must be JSON Schema 2020-12")
        rules = s.get("x-librl-cross-field")
        if not isinstance(rules, dict) or not rules:
            raise SchemaError("x-librl-cross-field must name the cross-field rules")
        description = s.get("description", "")
        for rule, text in rules.items():
            if f"{rule}: {text}" not in description:
                raise SchemaError(f"the description must list the cross-field rule '{rule}: {text}'")
            self.model.rules[ascii_text(rule, rule)] = ascii_text(rule, text)
        for name, sub in self.defs.items():
            if sub.get("type") != "object" and "oneOf" not in sub:
                refuse_unknown(f"$defs.{name}", sub, FIELD_KEYS)
        self.object("config", s, "(top)")
        for name, sub in self.defs.items():
            if sub.get("type") == "object" and name not in self.model.objects:
                raise SchemaError(f"$defs.{name}: an object no field uses")
        return self.model

    def object(
        self, name: str, node: Dict[str, Any], where: str, defaults: Optional[Dict[str, Any]] = None
    ) -> None:
        """An object's fields, as `name`; `defaults` are a use's own
        defaults for some of them (the fields beside its $ref)."""
        if where != "(top)":
            refuse_unknown(where, node, OBJECT_KEYS)
        if node.get("additionalProperties") is not False:
            raise SchemaError(f"{where}: objects must say additionalProperties: false")
        required = node.get("required", [])
        props = node.get("properties", {})
        for req in required:
            if req not in props:
                raise SchemaError(f"{where}: required {req!r} is not a property")
        for i, sub in enumerate(node.get("allOf", [])):
            if "x-librl-rule" not in sub:
                raise SchemaError(f"{where}.allOf[{i}]: only cross-field rules (x-librl-rule) may be combined")
            check_rule(f"{where}.allOf[{i}]", sub, self.model.rules)
        self.model.objects[name] = []  # placed before its fields' objects
        fields = [self.field(key, sub, f"{where}.{key}", key in required) for key, sub in props.items()]
        for key, override in (defaults or {}).items():
            there = f"{where} as {name}: properties.{key}"
            if not isinstance(override, dict):
                raise SchemaError(f"{there}: not an object")
            refuse_unknown(there, override, OVERRIDE_KEYS)
            matching = [f for f in fields if f.name == key]
            if not matching:
                raise SchemaError(f"{there}: {key!r} is not a field of the object")
            if "default" in override:
                matching[0].default = ascii_text(there, json.dumps(override["default"], separators=(",", ":")))
        self.model.objects[name] = fields

    def resolve(self, node: Dict[str, Any], where: str) -> Tuple[Dict[str, Any], Optional[str]]:
        """The node with its $ref's definition merged under it, and the
        definition's name."""
        if "$ref" not in node:
            return node, None
        ref = node["$ref"]
        prefix = "#/$defs/"
        if not ref.startswith(prefix) or ref[len(prefix):] not in self.defs:
            raise SchemaError(f"{where}: $ref {ref!r} is not a definition of $defs")
        name = ref[len(prefix):]
        base = dict(self.defs[name])
        base.update({k: v for k, v in node.items() if k != "$ref"})
        return base, name

    def field(self, name: str, node: Dict[str, Any], where: str, required: bool) -> Field:
        refuse_unknown(where, node, FIELD_KEYS)
        merged, ref = self.resolve(node, where)
        f = Field(name=ascii_text(where, name), kind="string", required=required)
        if "default" in merged:
            f.default = ascii_text(where, json.dumps(merged["default"], separators=(",", ":")))
        if "x-librl-expected" in merged:
            f.expected = ascii_text(where, merged["x-librl-expected"])
        if merged.get("type") == "object" and isinstance(merged.get("additionalProperties"), dict) and ref is None:
            return self.map_field(f, merged, where)
        if merged.get("type") == "object":
            if ref is None:
                raise SchemaError(f"{where}: an object field must $ref a definition (its name)")
            f.kind = "object"
            defaults = node.get("properties")
            if defaults is None:
                f.object = ref
                if ref not in self.model.objects:
                    self.object(ref, self.defs[ref], f"$defs.{ref}")
                return f
            # This use has defaults of its own: an object of its own, named
            # after the field.
            if not name or name in self.model.objects or name in self.defs:
                raise SchemaError(f"{where}: an object with its own defaults is named after its field, {name!r}, which is taken")
            f.object = name
            self.object(name, self.defs[ref], where, defaults)
            return f
        if "properties" in node or "propertyNames" in merged or "additionalProperties" in merged:
            raise SchemaError(f"{where}: properties, propertyNames or additionalProperties on a field that is no object")
        if isinstance(merged.get("type"), list):
            if merged["type"] != JSON_TYPES:
                raise SchemaError(f"{where}: a list of types is a json field's, exactly {JSON_TYPES}")
            extra = set(merged) - {"description", "type", "x-librl-expected"}
            if extra:
                raise SchemaError(f"{where}: a json field takes no {sorted(extra)}")
            f.kind = "json"
            return f
        refuse_unknown(where, merged, FIELD_KEYS)
        if "x-librl-duration" in merged:
            d = merged["x-librl-duration"]
            refuse_unknown(f"{where}.x-librl-duration", d, DURATION_KEYS)
            if ref != "duration":
                raise SchemaError(f"{where}: x-librl-duration bounds a $ref to #/$defs/duration")
            f.kind = "duration"
            f.duration_min_ms = bound(where, d, "min_ms")
            f.duration_max_ms = bound(where, d, "max_ms")
            if f.duration_min_ms is None or f.duration_max_ms is None:
                raise SchemaError(f"{where}: x-librl-duration needs min_ms and max_ms")
            return f
        if ref == "duration":
            raise SchemaError(f"{where}: a duration field needs x-librl-duration bounds")
        if "x-librl-rate" in merged:
            r = merged["x-librl-rate"]
            refuse_unknown(f"{where}.x-librl-rate", r, RATE_KEYS)
            if merged.get("type") != "string":
                raise SchemaError(f"{where}: a rate is a string")
            f.kind = "rate"
            f.minimum, f.maximum = bound(where, r, "min_count"), bound(where, r, "max_count")
            f.duration_min_ms, f.duration_max_ms = bound(where, r, "min_ms"), bound(where, r, "max_ms")
            f.pattern = self.pattern(where, merged)
            if None in (f.minimum, f.maximum, f.duration_min_ms, f.duration_max_ms):
                raise SchemaError(f"{where}: x-librl-rate needs min_count, max_count, min_ms, max_ms")
            return f
        if "oneOf" in merged:
            branches = [self.resolve(b, f"{where}.oneOf")[0] for b in merged["oneOf"]]
            types = [b.get("type") for b in branches]
            if types != ["integer", "string"]:
                raise SchemaError(f"{where}: oneOf must be an integer, then a string")
            for b in branches:
                refuse_unknown(f"{where}.oneOf", b, FIELD_KEYS)
            f.kind = "int-or-string"
            f.minimum, f.maximum = bound(where, branches[0], "minimum"), bound(where, branches[0], "maximum")
            f.pattern = self.pattern(where, branches[1])
            if f.minimum is None or f.maximum is None or f.pattern is None or f.expected is None:
                raise SchemaError(f"{where}: int-or-string needs bounds, a pattern and x-librl-expected")
            return f
        kind = {"string": "string", "integer": "integer", "boolean": "boolean", "array": "list"}.get(
            merged.get("type", "")
        )
        if kind is None:
            raise SchemaError(f"{where}: type {merged.get('type')!r} is not one the walkers know")
        f.kind = kind
        if "enum" in merged:
            if kind != "string" or not all(isinstance(c, str) for c in merged["enum"]):
                raise SchemaError(f"{where}: an enum is a string field's")
            f.choices = tuple(ascii_text(where, c) for c in merged["enum"])
        if kind == "integer":
            f.minimum, f.maximum = bound(where, merged, "minimum"), bound(where, merged, "maximum")
            if f.minimum is None or f.maximum is None:
                raise SchemaError(f"{where}: an integer field needs minimum and maximum")
        elif "minimum" in merged or "maximum" in merged:
            raise SchemaError(f"{where}: minimum/maximum on a {kind} field")
        if kind == "string":
            f.pattern = self.pattern(where, merged)
            f.min_length, f.max_length = bound(where, merged, "minLength"), bound(where, merged, "maxLength")
            if f.max_length == 0:
                raise SchemaError(f"{where}: maxLength 0")
        elif "pattern" in merged or "minLength" in merged or "maxLength" in merged:
            raise SchemaError(f"{where}: pattern or lengths on a {kind} field")
        if kind == "list":
            f.min_items = bound(where, merged, "minItems")
            if "items" not in merged:
                raise SchemaError(f"{where}: a list needs items")
            f.items = self.field("", merged["items"], f"{where}[]", False)
        elif "minItems" in merged or "items" in merged:
            raise SchemaError(f"{where}: items on a {kind} field")
        return f

    def map_field(self, f: Field, merged: Dict[str, Any], where: str) -> Field:
        """An object whose names the document chooses (a name matching
        propertyNames' pattern), each holding a value of one schema."""
        extra = set(merged) - {"description", "type", "propertyNames", "additionalProperties", "default"}
        if extra:
            raise SchemaError(f"{where}: a map takes no {sorted(extra)}")
        names = merged.get("propertyNames")
        if not isinstance(names, dict):
            raise SchemaError(f"{where}: a map needs propertyNames (a pattern and x-librl-expected)")
        refuse_unknown(f"{where}.propertyNames", names, NAME_KEYS)
        f.kind = "map"
        f.key_pattern = self.pattern(f"{where}.propertyNames", names)
        if f.key_pattern is None or "x-librl-expected" not in names:
            raise SchemaError(f"{where}: a map's propertyNames need a pattern and x-librl-expected")
        f.key_expected = ascii_text(where, names["x-librl-expected"])
        value = merged["additionalProperties"]
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: a map's additionalProperties is the schema of its values")
        f.items = self.field("", value, f"{where}{{}}", False)
        return f

    def pattern(self, where: str, node: Dict[str, Any]) -> Optional[str]:
        pattern = node.get("pattern")
        if pattern is None:
            return None
        if not pattern.startswith("^"):
            raise SchemaError(f"{where}: patterns are anchored with ^ (JSON Schema searches)")
        return ascii_text(where, pattern)


# -- emitters ---------------------------------------------------------------

HEADER = "generated by scripts/gen-schema.py from " + SOURCE + "; do not edit"


def q(text: str) -> str:
    """A double-quoted string literal valid in Rust, TypeScript and Go (the
    text is ASCII)."""
    return json.dumps(text)


def py_str(text: str) -> str:
    """As ruff format writes it: double quotes unless that needs more escapes."""
    if '"' in text and "'" not in text:
        return "'" + text.replace("\\", "\\\\") + "'"
    return json.dumps(text)


def emit_python(model: Model) -> str:
    out = [
        f"# {HEADER}",
        '"""The configuration\'s schema as data.',
        "",
        "Each object's fields in the schema's order; a list's items are a Field",
        'named "", and so are a map\'s values (its names match ``key_pattern``).',
        "``default`` is the default as JSON text: parse it and walk it as if the",
        "document held it. Patterns are searched for (re.search) and anchored",
        'where they must be."""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from typing import Literal, Mapping, Optional, Tuple",
        "",
        "Kind = Literal[",
        *[f"    {py_str(k)}," for k in KINDS],
        "]",
        "",
        "",
        "@dataclass(frozen=True)",
        "class Field:",
        '    """One field of an object, as the schema gives it."""',
        "",
        "    name: str",
        "    kind: Kind",
        "    required: bool = False",
        "    default: Optional[str] = None",
        "    choices: Tuple[str, ...] = ()",
        "    minimum: Optional[int] = None",
        "    maximum: Optional[int] = None",
        "    pattern: Optional[str] = None",
        "    min_length: Optional[int] = None",
        "    max_length: Optional[int] = None",
        "    min_items: Optional[int] = None",
        "    items: Optional[Field] = None",
        "    object: Optional[str] = None",
        "    duration_min_ms: Optional[int] = None",
        "    duration_max_ms: Optional[int] = None",
        "    expected: Optional[str] = None",
        "    key_pattern: Optional[str] = None",
        "    key_expected: Optional[str] = None",
        "",
        "",
        f"ROOT = {py_str(model.root)}",
        "",
        "OBJECTS: Mapping[str, Tuple[Field, ...]] = {",
    ]

    def field_lines(f: Field, indent: str) -> List[str]:
        lines = [f"{indent}Field("]
        inner = indent + "    "
        for key, value in field_items(f):
            if key == "items":
                assert isinstance(value, Field)
                sub = field_lines(value, inner)
                sub[0] = f"{inner}items=" + sub[0].lstrip()
                lines += sub
                continue
            if key in ("pattern", "key_pattern") and isinstance(value, str) and value.endswith("$"):
                # re.search's $ also matches before a final newline.
                value = value[:-1] + "\\Z"
            if isinstance(value, tuple):
                text = "(" + ", ".join(py_str(c) for c in value) + ("," if len(value) == 1 else "") + ")"
            elif isinstance(value, bool):
                text = "True" if value else "False"
            elif isinstance(value, int):
                text = str(value)
            else:
                text = py_str(value)
            line = f"{inner}{key}={text},"
            # ruff lets a long line without spaces (one long literal) be.
            if len(line) > 100 and " " in line.strip():
                if isinstance(value, tuple):
                    lines.append(f"{inner}{key}=(")
                    lines += [f"{inner}    {py_str(c)}," for c in value]
                    lines.append(f"{inner}),")
                    continue
                line += "  # noqa: E501"
            lines.append(line)
        lines.append(f"{indent}),")
        return lines

    for name, fields in model.objects.items():
        out.append(f"    {py_str(name)}: (")
        for f in fields:
            out += field_lines(f, "        ")
        out.append("    ),")
    out += ["}", "", "#: The cross-field rules: checked in code after the walker.", "RULES: Mapping[str, str] = {"]
    for rule, text in model.rules.items():
        line = f"    {py_str(rule)}: {py_str(text)},"
        if len(line) > 100:
            inner = f"        {py_str(text)}"
            line = f"    {py_str(rule)}: (\n{inner}{'  # noqa: E501' if len(inner) > 100 else ''}\n    ),"
        out.append(line)
    out.append("}")
    return "\n".join(out) + "\n"


def field_items(f: Field) -> List[Tuple[str, Any]]:
    """(name, value) for each attribute that is set, in the Field's order."""
    items: List[Tuple[str, Any]] = [("name", f.name), ("kind", f.kind)]
    if f.required:
        items.append(("required", True))
    for key in (
        "default", "choices", "minimum", "maximum", "pattern", "min_length", "max_length",
        "min_items", "items", "object", "duration_min_ms", "duration_max_ms", "expected",
        "key_pattern", "key_expected",
    ):
        value = getattr(f, key)
        if value is not None and value != ():
            items.append((key, value))
    return items


def camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.capitalize() for p in rest)


def emit_typescript(model: Model) -> str:
    out = [
        f"// {HEADER}",
        "/**",
        " * The configuration's schema as data.",
        " *",
        " * Each object's fields in the schema's order; a list's items are a Field",
        ' * named "", and so are a map\'s values (its names match `keyPattern`).',
        " * `default` is the default as JSON text: parse it and walk it as if the",
        " * document held it. Patterns are searched for (RegExp.test) and anchored",
        " * where they must be.",
        " */",
        "",
        "export type Kind = " + " | ".join(q(k) for k in KINDS) + ";",
        "",
        "/** One field of an object, as the schema gives it. */",
        "export interface Field {",
        "  readonly name: string;",
        "  readonly kind: Kind;",
        "  readonly required: boolean;",
        "  readonly default?: string;",
        "  readonly choices: readonly string[];",
        "  readonly minimum?: number;",
        "  readonly maximum?: number;",
        "  readonly pattern?: string;",
        "  readonly minLength?: number;",
        "  readonly maxLength?: number;",
        "  readonly minItems?: number;",
        "  readonly items?: Field;",
        "  readonly object?: string;",
        "  readonly durationMinMs?: number;",
        "  readonly durationMaxMs?: number;",
        "  readonly expected?: string;",
        "  readonly keyPattern?: string;",
        "  readonly keyExpected?: string;",
        "}",
        "",
        f"export const ROOT = {q(model.root)};",
        "",
        "export const OBJECTS: Readonly<Record<string, readonly Field[]>> = {",
    ]

    def literal(f: Field) -> str:
        parts = [f"name: {q(f.name)}", f"kind: {q(f.kind)}", f"required: {'true' if f.required else 'false'}"]
        choices = "[" + ", ".join(q(c) for c in f.choices) + "]"
        for key, value in field_items(f):
            if key in ("name", "kind", "required", "choices"):
                continue
            if key == "items":
                parts.append(f"items: {literal(value)}")
            elif isinstance(value, int) and not isinstance(value, bool):
                parts.append(f"{camel(key)}: {value}")
            else:
                parts.append(f"{camel(key)}: {q(value)}")
        parts.insert(3, f"choices: {choices}")
        return "{ " + ", ".join(parts) + " }"

    for name, fields in model.objects.items():
        out.append(f"  {name}: [")
        out += [f"    {literal(f)}," for f in fields]
        out.append("  ],")
    out += ["};", "", "/** The cross-field rules: checked in code after the walker. */",
            "export const RULES: Readonly<Record<string, string>> = {"]
    out += [f"  {q(rule)}: {q(text)}," for rule, text in model.rules.items()]
    out.append("};")
    return "\n".join(out) + "\n"


def emit_go(model: Model) -> str:
    go_kind = {k: "schema" + "".join(p.capitalize() for p in k.split("-")) for k in KINDS}
    out = [
        "// Code " + HEADER.replace("; do not edit", ". DO NOT EDIT."),
        "",
        "package nethttp",
        "",
        "// schemaKind is a field's kind in the configuration's schema.",
        "type schemaKind uint8",
        "",
        "const (",
    ]
    for i, k in enumerate(KINDS):
        out.append(f"\t{go_kind[k]} schemaKind = iota" if i == 0 else f"\t{go_kind[k]}")
    out += [
        ")",
        "",
        "// schemaField is one field of an object, as the schema gives it. A zero",
        "// value is an absent one (the generator refuses a maxLength of 0, and",
        "// every integer, rate and duration field has both bounds). Default is the",
        "// default as JSON text: parse it and walk it as if the document held it.",
        "// Patterns are searched for (MatchString) and anchored where they must be.",
        "// A list's items and a map's values are Items; a map's names match KeyPattern.",
        "type schemaField struct {",
        "\tName          string",
        "\tKind          schemaKind",
        "\tRequired      bool",
        "\tDefault       string",
        "\tChoices       []string",
        "\tMinimum       int64",
        "\tMaximum       int64",
        "\tPattern       string",
        "\tMinLength     int",
        "\tMaxLength     int",
        "\tMinItems      int",
        "\tItems         *schemaField",
        "\tObject        string",
        "\tDurationMinMS int64",
        "\tDurationMaxMS int64",
        "\tExpected      string",
        "\tKeyPattern    string",
        "\tKeyExpected   string",
        "}",
        "",
        "// schemaRoot is the document's object.",
        f"const schemaRoot = {q(model.root)}",
        "",
        "// schemaObjects holds each object's fields in the schema's order.",
        "var schemaObjects = map[string][]schemaField{",
    ]
    go_key = {
        "name": "Name", "kind": "Kind", "required": "Required", "default": "Default",
        "choices": "Choices", "minimum": "Minimum", "maximum": "Maximum", "pattern": "Pattern",
        "min_length": "MinLength", "max_length": "MaxLength", "min_items": "MinItems",
        "items": "Items", "object": "Object", "duration_min_ms": "DurationMinMS",
        "duration_max_ms": "DurationMaxMS", "expected": "Expected",
        "key_pattern": "KeyPattern", "key_expected": "KeyExpected",
    }

    def literal(f: Field) -> str:
        parts = []
        for key, value in field_items(f):
            if key == "name" and not value:
                continue
            if key == "kind":
                parts.append(f"Kind: {go_kind[value]}")
            elif key == "items":
                parts.append(f"Items: &schemaField{literal(value)}")
            elif key == "choices":
                parts.append("Choices: []string{" + ", ".join(q(c) for c in value) + "}")
            elif isinstance(value, bool):
                parts.append(f"{go_key[key]}: true")
            elif isinstance(value, int):
                parts.append(f"{go_key[key]}: {value}")
            else:
                parts.append(f"{go_key[key]}: {q(value)}")
        return "{" + ", ".join(parts) + "}"

    for name, fields in model.objects.items():
        out.append(f"\t{q(name)}: {{")
        out += [f"\t\t{literal(f)}," for f in fields]
        out.append("\t},")
    out += ["}", "", "// schemaRules are the cross-field rules: checked in code after the walker.",
            "var schemaRules = map[string]string{"]
    width = max(len(q(r)) for r in model.rules) + 1
    out += [f"\t{(q(rule) + ':').ljust(width)} {q(text)}," for rule, text in model.rules.items()]
    out.append("}")
    return "\n".join(out) + "\n"


def emit_rust(model: Model) -> str:
    rust_kind = {k: "".join(p.capitalize() for p in k.split("-")) for k in KINDS}
    out = [
        f"// {HEADER}",
        "",
        "//! The configuration's schema as data.",
        "//!",
        "//! Each object's fields in the schema's order; a list's items are a",
        '//! [`Field`] named "", and so are a map\'s values (its names match',
        "//! `key_pattern`). `default` is the default as JSON text: parse it and",
        "//! walk it as if the document held it. Patterns are searched for",
        "//! (`Regex::is_match`) and anchored where they must be.",
        "",
        "/// A field's kind.",
        "#[derive(Clone, Copy, Debug, PartialEq, Eq)]",
        "pub enum Kind {",
        *[f"    {rust_kind[k]}," for k in KINDS],
        "}",
        "",
        "/// One field of an object, as the schema gives it.",
        "#[derive(Debug)]",
        "pub struct Field {",
        "    pub name: &'static str,",
        "    pub kind: Kind,",
        "    pub required: bool,",
        "    pub default: Option<&'static str>,",
        "    pub choices: &'static [&'static str],",
        "    pub minimum: Option<u64>,",
        "    pub maximum: Option<u64>,",
        "    pub pattern: Option<&'static str>,",
        "    pub min_length: Option<u64>,",
        "    pub max_length: Option<u64>,",
        "    pub min_items: Option<u64>,",
        "    pub items: Option<&'static Field>,",
        "    pub object: Option<&'static str>,",
        "    pub duration_min_ms: Option<u64>,",
        "    pub duration_max_ms: Option<u64>,",
        "    pub expected: Option<&'static str>,",
        "    pub key_pattern: Option<&'static str>,",
        "    pub key_expected: Option<&'static str>,",
        "}",
        "",
        "/// An object: its name and its fields.",
        "#[derive(Debug)]",
        "pub struct Object {",
        "    pub name: &'static str,",
        "    pub fields: &'static [Field],",
        "}",
        "",
        "/// The document's object.",
        f"pub const ROOT: &str = {q(model.root)};",
        "",
        "/// Every object, the document's first.",
        "#[rustfmt::skip]",
        "pub static OBJECTS: &[Object] = &[",
    ]

    def opt(value: Any) -> str:
        if value is None:
            return "None"
        if isinstance(value, int):
            return f"Some({value})"
        return f"Some({q(value)})"

    def literal(f: Field, indent: str) -> List[str]:
        i = indent + "    "
        lines = [
            "Field {",
            f"{i}name: {q(f.name)},",
            f"{i}kind: Kind::{rust_kind[f.kind]},",
            f"{i}required: {'true' if f.required else 'false'},",
            f"{i}default: {opt(f.default)},",
            f"{i}choices: &[" + ", ".join(q(c) for c in f.choices) + "],",
            f"{i}minimum: {opt(f.minimum)},",
            f"{i}maximum: {opt(f.maximum)},",
            f"{i}pattern: {opt(f.pattern)},",
            f"{i}min_length: {opt(f.min_length)},",
            f"{i}max_length: {opt(f.max_length)},",
            f"{i}min_items: {opt(f.min_items)},",
        ]
        if f.items is None:
            lines.append(f"{i}items: None,")
        else:
            sub = literal(f.items, i)
            lines.append(f"{i}items: Some(&" + sub[0])
            lines += sub[1:-1]
            lines.append(sub[-1] + "),")
        lines += [
            f"{i}object: {opt(f.object)},",
            f"{i}duration_min_ms: {opt(f.duration_min_ms)},",
            f"{i}duration_max_ms: {opt(f.duration_max_ms)},",
            f"{i}expected: {opt(f.expected)},",
            f"{i}key_pattern: {opt(f.key_pattern)},",
            f"{i}key_expected: {opt(f.key_expected)},",
            f"{indent}}}",
        ]
        return lines

    for name, fields in model.objects.items():
        out += ["    Object {", f"        name: {q(name)},", "        fields: &["]
        for f in fields:
            lines = literal(f, "            ")
            out.append("            " + lines[0])
            out += lines[1:-1]
            out.append(lines[-1] + ",")
        out += ["        ],", "    },"]
    out += ["];", "", "/// The cross-field rules: checked in code after the walker.",
            "#[rustfmt::skip]", "pub static RULES: &[(&str, &str)] = &["]
    out += [f"    ({q(rule)}, {q(text)})," for rule, text in model.rules.items()]
    out.append("];")
    return "\n".join(out) + "\n"


def java_str(text: str) -> str:
    """A Java string literal of ASCII text without control characters."""
    if any(ord(c) < 0x20 or ord(c) > 0x7E for c in text):
        raise SchemaError(f"{text!r}: a generated Java string is printable ASCII")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit_java(model: Model) -> str:
    java_kind = {k: k.upper().replace("-", "_") for k in KINDS}
    out = [
        f"// {HEADER}",
        "",
        "package io.librl.http;",
        "",
        "import java.util.List;",
        "import java.util.Map;",
        "",
        "/**",
        " * The configuration's schema as data.",
        " *",
        " * <p>Each object's fields in the schema's order; a list's items are a {@link Field} named",
        ' * "", and so are a map\'s values (its names match {@code keyPattern}). {@code defaultValue}',
        " * is the default as the document would hold it (a {@code String}, {@code Long}, {@code",
        " * Boolean}, or an empty {@code List} or {@code Map}): the walker walks it as if the document",
        " * held it. Patterns are searched for ({@code Matcher.find}) and anchored",
        " * where they must be (a final {@code $} is written {@code \\z}: Java's {@code $} also",
        " * matches before a final line terminator).",
        " */",
        "final class Schema {",
        "  private Schema() {}",
        "",
        "  /** A field's kind. */",
        "  enum Kind {",
        *[f"    {java_kind[k]}{',' if i < len(KINDS) - 1 else ''}" for i, k in enumerate(KINDS)],
        "  }",
        "",
        "  /** One field of an object, as the schema gives it; null where the schema gives nothing. */",
        "  record Field(",
        "      String name,",
        "      Kind kind,",
        "      boolean required,",
        "      Object defaultValue,",
        "      List<String> choices,",
        "      Long minimum,",
        "      Long maximum,",
        "      String pattern,",
        "      Long minLength,",
        "      Long maxLength,",
        "      Long minItems,",
        "      Field items,",
        "      String object,",
        "      Long durationMinMs,",
        "      Long durationMaxMs,",
        "      String expected,",
        "      String keyPattern,",
        "      String keyExpected) {}",
        "",
        "  /** The document's object. */",
        f"  static final String ROOT = {java_str(model.root)};",
        "",
        "  /** Every object's fields, by the object's name. */",
        "  static final Map<String, List<Field>> OBJECTS =",
        "      Map.ofEntries(",
    ]

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "Boolean.TRUE" if v else "Boolean.FALSE"
        if isinstance(v, int):
            return f"Long.valueOf({v}L)"
        if isinstance(v, str):
            return java_str(v)
        if v == []:
            return "List.of()"
        if v == {}:
            return "Map.of()"
        raise SchemaError(f"a default of {v!r} has no Java form in scripts/gen-schema.py")

    def opt_long(v: Optional[int]) -> str:
        return "null" if v is None else f"{v}L"

    def opt_str(v: Optional[str]) -> str:
        return "null" if v is None else java_str(v)

    def literal(f: Field, indent: str) -> List[str]:
        i = indent + "    "
        pattern = f.pattern
        if pattern is not None and pattern.endswith("$"):
            pattern = pattern[:-1] + "\\z"
        key_pattern = f.key_pattern
        if key_pattern is not None and key_pattern.endswith("$"):
            key_pattern = key_pattern[:-1] + "\\z"
        default = "null" if f.default is None else value(json.loads(f.default))
        lines = [
            "new Field(",
            f"{i}{java_str(f.name)},",
            f"{i}Kind.{java_kind[f.kind]},",
            f"{i}{'true' if f.required else 'false'},",
            f"{i}{default},",
            f"{i}List.of(" + ", ".join(java_str(c) for c in f.choices) + "),",
            f"{i}{opt_long(f.minimum)},",
            f"{i}{opt_long(f.maximum)},",
            f"{i}{opt_str(pattern)},",
            f"{i}{opt_long(f.min_length)},",
            f"{i}{opt_long(f.max_length)},",
            f"{i}{opt_long(f.min_items)},",
        ]
        if f.items is None:
            lines.append(f"{i}null,")
        else:
            sub = literal(f.items, i)
            lines.append(f"{i}" + sub[0])
            lines += sub[1:-1]
            lines.append(sub[-1] + ",")
        lines += [
            f"{i}{opt_str(f.object)},",
            f"{i}{opt_long(f.duration_min_ms)},",
            f"{i}{opt_long(f.duration_max_ms)},",
            f"{i}{opt_str(f.expected)},",
            f"{i}{opt_str(key_pattern)},",
            f"{i}{opt_str(f.key_expected)})",
        ]
        return lines

    objects = list(model.objects.items())
    for n, (name, fields) in enumerate(objects):
        out.append(f"          Map.entry(")
        out.append(f"              {java_str(name)},")
        out.append("              List.of(")
        for k, f in enumerate(fields):
            lines = literal(f, "                  ")
            out.append("                  " + lines[0])
            out += lines[1:-1]
            out.append(lines[-1] + ("," if k < len(fields) - 1 else ")"))
        out[-1] += ")" + ("," if n < len(objects) - 1 else ");")
    out += [
        "",
        "  /** The cross-field rules: checked in code after the walker. */",
        "  static final Map<String, String> RULES =",
        "      Map.ofEntries(",
    ]
    rules = list(model.rules.items())
    for n, (rule, text) in enumerate(rules):
        out.append(f"          Map.entry({java_str(rule)}, {java_str(text)})" + ("," if n < len(rules) - 1 else ");"))
    out.append("}")
    return "\n".join(out) + "\n"


EMITTERS: Dict[str, Callable[[Model], str]] = {
    "rust": emit_rust,
    "python": emit_python,
    "typescript": emit_typescript,
    "go": emit_go,
    "java": emit_java,
}


def main(argv: List[str]) -> int:
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    try:
        schema = json.loads(SCHEMA.read_text(encoding="utf-8"), object_pairs_hook=unique_pairs)
        model = Reader(schema).read()
    except (SchemaError, ValueError) as e:
        print(f"gen-schema: {SOURCE}: {e}", file=sys.stderr)
        return 1
    stale = []
    for language, path in OUTPUTS.items():
        text = EMITTERS[language](model)
        target = ROOT / path
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            stale.append(path)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"gen-schema: wrote {path}")
    for path in stale:
        print(f"gen-schema: {path} is stale: run scripts/gen-schema.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
