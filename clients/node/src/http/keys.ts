/**
 * Keys (docs/http.md, Keys and Identity): how a subject's value appears
 * inside the key's hash tag, and the limiter and override keys of a
 * policy. Values are bytes: a header value is the Latin-1 string Node
 * gives (one character per byte), a user name its UTF-8 bytes.
 */
import { createHash } from "node:crypto";

/** The first 32 hex digits of the bytes' SHA-256: `printf %s "$KEY" | sha256sum | cut -c1-32`. */
export function sha256Prefix(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 32);
}

/**
 * An API key's id: the SHA-256 prefix of the header value's bytes. Node
 * decodes header bytes as Latin-1, so encoding back with Latin-1 gives
 * the bytes the client sent (UTF-8 would hash other bytes for a non-ASCII
 * key than every other integration does).
 */
export function apiKeyId(headerValue: string): string {
  return sha256Prefix(Buffer.from(headerValue, "latin1"));
}

/** 1 to 64 bytes of `A-Z a-z 0-9 . _ ~ @ + = : / -`: safe verbatim inside a key's braces. */
const KEY_SAFE = /^[A-Za-z0-9._~@+=:/-]{1,64}$/;

/**
 * A header value as it appears in a key: verbatim when key-safe, else
 * `sha256-` and the SHA-256 prefix of its bytes (a `}` must not break the
 * hash tag). The value is the Latin-1 string of the header's bytes.
 */
export function headerKeyValue(headerValue: string): string {
  return KEY_SAFE.test(headerValue) ? headerValue : `sha256-${sha256Prefix(Buffer.from(headerValue, "latin1"))}`;
}

/** A user name as it appears in a key: verbatim when key-safe, else hashed from its UTF-8 bytes. */
export function userKeyValue(user: string): string {
  return KEY_SAFE.test(user) ? user : `sha256-${sha256Prefix(Buffer.from(user, "utf8"))}`;
}

/** `<prefix>{<subject>}`: the subject is the hash tag, so one subject's keys share a cluster slot. */
export function keyBase(prefix: string, subjectTag: string): string {
  return `${prefix}{${subjectTag}}`;
}

/** The limiter key: `<prefix>{<subject>}:<policy>`. */
export function limiterKey(base: string, policy: string): string {
  return `${base}:${policy}`;
}

/** The override key: `<prefix>{<subject>}:override:<policy>`. */
export function overrideKey(base: string, policy: string): string {
  return `${base}:override:${policy}`;
}
