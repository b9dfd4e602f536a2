/**
 * Identity sources (docs/http.md, Named identities): how a cookie, a
 * query parameter and an `Authorization` scheme's credentials are read
 * from a request. Values are bytes, held as Latin-1 text (one character
 * per byte), as Node gives header values and request targets.
 */
import { trimOws } from "./identity.js";

/**
 * A cookie's value from the `Cookie` header (its lines joined with "; "):
 * `name=value` pairs split on `;`, each trimmed; the first pair whose
 * name is exactly `name`; one surrounding pair of double quotes removed;
 * no decoding. Undefined when absent or empty.
 */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0 || trimOws(part.slice(0, eq)) !== name) continue;
    let value = trimOws(part.slice(eq + 1));
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    return value === "" ? undefined : value;
  }
  return undefined;
}

/** A hex digit's value, or -1. */
function hex(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/** `application/x-www-form-urlencoded` decoding of bytes: `+` is a space, then `%XX` once (a `%` without two hex digits stays). */
export function formDecode(text: string): string {
  if (!text.includes("+") && !text.includes("%")) return text;
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2b) out += " ";
    else if (c === 0x25 && hex(text.charCodeAt(i + 1)) >= 0 && hex(text.charCodeAt(i + 2)) >= 0) {
      out += String.fromCharCode(hex(text.charCodeAt(i + 1)) * 16 + hex(text.charCodeAt(i + 2)));
      i += 2;
    } else out += text[i];
  }
  return out;
}

/**
 * A query parameter's value from the raw query string (after the `?`, up
 * to any `#`): pairs split on `&`, name and value at the first `=`, each
 * form-decoded; the first pair whose decoded name is exactly `name`. A
 * pair without `=` is skipped (`q&q=2` gives 2, as the sources vectors
 * and the Go integration read it). Undefined when absent or empty.
 */
export function queryValue(query: string | undefined, name: string): string | undefined {
  if (query === undefined || query === "") return undefined;
  for (const pair of query.split("&")) {
    const eq = pair.indexOf("=");
    if (eq < 0 || formDecode(pair.slice(0, eq)) !== name) continue;
    const value = formDecode(pair.slice(eq + 1));
    return value === "" ? undefined : value;
  }
  return undefined;
}

/**
 * The credentials of an `Authorization` value whose scheme (its first
 * token, up to the first space) is `scheme` (lower case) without regard
 * to ASCII case: the rest after the spaces, trimmed. Undefined otherwise.
 */
export function authorizationValue(header: string | undefined, scheme: string): string | undefined {
  if (header === undefined) return undefined;
  const value = trimOws(header);
  const space = value.indexOf(" ");
  if (space < 0 || value.slice(0, space).toLowerCase() !== scheme) return undefined;
  const credentials = trimOws(value.slice(space + 1));
  return credentials === "" ? undefined : credentials;
}

/** The raw query string of a request target (after the first `?`, up to any `#`), or undefined without one. */
export function queryOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const q = url.indexOf("?");
  if (q < 0) return undefined;
  const hash = url.indexOf("#", q);
  return hash < 0 ? url.slice(q + 1) : url.slice(q + 1, hash);
}
