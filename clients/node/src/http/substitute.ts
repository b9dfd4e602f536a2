/**
 * `${VAR}` and `${VAR:-default}` in a configuration file (docs/http.md,
 * Environment variables): replaced in the file's text from the
 * environment before it is parsed, so a service configured by environment
 * variables (Forja's `APP__SECURITY__RATE_LIMIT_*`) keeps one file.
 * `$${` is a literal `${`; a `$` before anything else stays. Native
 * objects given as the configuration are not substituted.
 */
import { ConfigError } from "./configuration.js";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The text with every reference replaced. `${VAR:-default}` takes the
 * default when VAR is unset or empty; an unset VAR without a default, an
 * unclosed `${` and a name that is not a variable's fail, naming it.
 */
export function substitute(text: string, env: Readonly<Record<string, string | undefined>> = process.env): string {
  if (!text.includes("${")) return text;
  let out = "";
  let at = 0;
  for (;;) {
    const dollar = text.indexOf("$", at);
    if (dollar < 0 || dollar + 1 >= text.length) return out + text.slice(at);
    out += text.slice(at, dollar);
    if (text.startsWith("$${", dollar)) {
      out += "${";
      at = dollar + 3;
    } else if (text.startsWith("${", dollar)) {
      const end = text.indexOf("}", dollar);
      if (end < 0) throw new ConfigError("${", "is not closed by }");
      const ref = text.slice(dollar + 2, end);
      const cut = ref.indexOf(":-");
      const name = cut < 0 ? ref : ref.slice(0, cut);
      if (!NAME.test(name)) {
        throw new ConfigError(`\${${ref}}`, `${JSON.stringify(name)} is not a variable name (letters, digits and _, not starting with a digit)`);
      }
      const value = env[name];
      if (cut >= 0 && (value === undefined || value === "")) out += ref.slice(cut + 2);
      else if (value === undefined) throw new ConfigError(`\${${name}}`, "not set");
      else out += value;
      at = end + 1;
    } else {
      out += "$";
      at = dollar + 1;
    }
  }
}
