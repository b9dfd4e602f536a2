/**
 * Routes (docs/http.md, Routes): the canonical path a route is matched
 * on, and the route a request selects: the longest whole-segment prefix
 * of its canonical path, ASCII case folded, among the routes whose
 * methods include the request's; without routes, every policy.
 *
 * Paths are byte strings: one character per byte, as Node gives a
 * request's URL (Latin-1). A route's path from the configuration is a
 * Unicode string, taken as its UTF-8 bytes.
 */
import type { Deny, Policy, Route } from "./configuration.js";

/** A hex digit's value, or -1. */
function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x61 + 10 : -1;
}

/**
 * Percent-decoded until no `%XX` is left, in one pass: each character is
 * pushed, and while the output ends in an escape it is decoded in place (a
 * decoded byte may end another: `%%32F` is `/`). Escapes never overlap, so
 * this is what decoding the whole path again and again gives, in linear
 * time however deep the nesting (`%252525...41`): a 16 KB target nested
 * to the end took 130 ms a request when decoded pass after pass.
 */
function decodeFully(path: string): string {
  const out: number[] = [];
  for (let i = 0; i < path.length; i++) {
    out.push(path.charCodeAt(i));
    for (let n = out.length; n >= 3 && out[n - 3] === 0x25; n = out.length) {
      const high = hexDigit(out[n - 2] as number);
      const low = hexDigit(out[n - 1] as number);
      if (high < 0 || low < 0) break;
      out.length = n - 3;
      out.push(high * 16 + low);
    }
  }
  let text = "";
  // In slices: a spread of a whole long array would overflow the call stack.
  for (let i = 0; i < out.length; i += 8192) text += String.fromCharCode(...out.slice(i, i + 8192));
  return text;
}

/**
 * The path routes are matched on: the query dropped (from the first `?`),
 * `%XX` decoded until none remains (so a path decoded once by a framework
 * and the raw one agree), each segment cut at its first `;`, empty and
 * `.` segments dropped, `..` removing the segment before it (never above
 * the root), joined with `/` and no trailing slash. At least as merged as
 * Express's and Fastify's routers, so a path either routes to a handler
 * is never checked less than its route says.
 */
export function canonicalPath(path: string): string {
  if ((scan(path) & CANONICAL) !== 0) return path;
  let p = pathOfAbsoluteForm(path);
  const q = p.search(/[?#]/);
  if (q >= 0) p = p.slice(0, q);
  if (p.includes("%")) p = decodeFully(p);
  const segments: string[] = [];
  for (const part of p.split("/")) {
    const semicolon = part.indexOf(";");
    const segment = semicolon < 0 ? part : part.slice(0, semicolon);
    if (segment === "" || segment === ".") continue;
    if (segment === "..") segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join("/")}`;
}

/** An absolute-form target's path and query (`http://host/a?b` gives `/a?b`, `http://host` gives ""); any other target as it is. */
function pathOfAbsoluteForm(path: string): string {
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(path);
  return m === null ? path : path.slice(m[0].length);
}

const CANONICAL = 1;
const NO_UPPER_CASE = 2;

/**
 * In one scan (most requests' paths are both): whether a path is its own
 * canonical path (it starts with `/`, has no `%`, `;` or `?`, no segment
 * that is empty or starts with `.`, no trailing slash), and whether it has
 * no A-Z.
 */
function scan(path: string): number {
  const n = path.length;
  if (n === 0 || path.charCodeAt(0) !== 0x2f) return 0;
  let upper = false;
  for (let i = 1; i < n; i++) {
    const c = path.charCodeAt(i);
    // `%`, `;`, `?`, `#`
    if (c === 0x25 || c === 0x3b || c === 0x3f || c === 0x23) return 0;
    // A segment's first character: not `/` (empty), not `.`.
    if ((c === 0x2f || c === 0x2e) && path.charCodeAt(i - 1) === 0x2f) return 0;
    if (c >= 0x41 && c <= 0x5a) upper = true;
  }
  if (n > 1 && path.charCodeAt(n - 1) === 0x2f) return 0;
  return upper ? CANONICAL : CANONICAL | NO_UPPER_CASE;
}

/** What routes are matched on: the canonical path, ASCII case folded. */
export function routeMatchPath(path: string): string {
  const s = scan(path);
  if (s === (CANONICAL | NO_UPPER_CASE)) return path;
  return foldAsciiCase(s === CANONICAL ? path : canonicalPath(path));
}

/** A Unicode string's UTF-8 bytes, one character per byte. */
export function utf8Bytes(text: string): string {
  return /^[\x00-\x7f]*$/.test(text) ? text : Buffer.from(text, "utf8").toString("latin1");
}

/** Folds A-Z to a-z and nothing else (bytes above 0x7F are not letters here). */
export function foldAsciiCase(bytes: string): string {
  if (!/[A-Z]/.test(bytes)) return bytes;
  return bytes.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** `/api` covers `/api` and `/api/x`, never `/apix`; `/` covers everything. */
function covers(prefix: string, path: string): boolean {
  if (prefix === "/" || path === prefix) return true;
  return path.startsWith(prefix) && path.charCodeAt(prefix.length) === 0x2f;
}

/** The policies that apply to a request, and the configuration route that chose them (if one did). */
export interface Selection {
  readonly policies: readonly Policy[];
  readonly route: string | undefined;
  /** The route's own refusal (its `deny` over the configuration's); absent: the configuration's `deny`. */
  readonly deny?: Deny | undefined;
}

interface Compiled {
  /** Canonical, case folded. */
  readonly match: string;
  readonly methods: ReadonlySet<string> | undefined;
  readonly selection: Selection;
}

const NOTHING: Selection = Object.freeze({ policies: [], route: undefined });

/** The configuration's routes, canonicalized and ordered once, at start-up. */
export class Routes {
  readonly #routes: readonly Compiled[] | undefined;
  readonly #every: Selection;

  /** `routes` undefined (or empty): every policy applies to every request. */
  constructor(routes: readonly Route[] | undefined, everyPolicy: readonly Policy[]) {
    this.#every = Object.freeze({ policies: everyPolicy, route: undefined });
    if (routes === undefined || routes.length === 0) return;
    // Longest first; among equally long ones the file's order (the sort is stable).
    this.#routes = routes
      .map((r) => ({
        match: routeMatchPath(utf8Bytes(r.path)),
        methods: r.methods === undefined ? undefined : new Set(r.methods),
        selection: Object.freeze({ policies: r.policies, route: r.path, deny: r.deny }),
      }))
      .sort((a, b) => b.match.length - a.match.length);
  }

  /** The route of a request: `path` is the request's path as the framework gives it, raw or decoded. */
  select(method: string, path: string): Selection {
    const routes = this.#routes;
    if (routes === undefined) return this.#every;
    const match = routeMatchPath(path);
    for (const route of routes) {
      if (covers(route.match, match) && (route.methods === undefined || route.methods.has(method))) return route.selection;
    }
    return NOTHING;
  }
}
