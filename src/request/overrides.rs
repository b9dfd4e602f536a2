//! `RL.OVERRIDE SET|GET|DEL|LIST` (and the dotted aliases) to typed
//! requests.

use super::words::{foreign_option, parse_amount, parse_plain_u64, parse_window, value, Seen};
use super::ArgError;
use librl_core::overrides::Override;

/// `RL.OVERRIDE.SET okey limit window [BURST capacity] [TTL duration]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverrideSet<'a, W> {
    pub okey: &'a W,
    pub value: Override,
    pub ttl_ms: Option<u64>,
    pub replayed_now_ms: Option<u64>,
}

/// The okey is argv[1] (argv[0] being the command or subcommand name).
/// `trusted` allows the internal `NOW ms` option that anchors a TTL to the
/// primary's clock on replicas and AOF replay.
pub fn parse_override_set<'a, W: AsRef<[u8]>>(
    argv: &'a [W],
    trusted: bool,
    name: &'static str,
) -> Result<OverrideSet<'a, W>, ArgError> {
    let (Some(okey), Some(limit), Some(window)) = (argv.get(1), argv.get(2), argv.get(3)) else {
        return Err(ArgError::WrongArity(name));
    };
    let (limit, window) = (limit.as_ref(), window.as_ref());
    let mut set = OverrideSet {
        okey,
        value: Override {
            limit: parse_amount(limit, "limit")?,
            window_ms: parse_window(window, "window")?,
            burst: None,
        },
        ttl_ms: None,
        replayed_now_ms: None,
    };
    let mut seen = Seen::default();
    let mut i = 4;
    while let Some(word) = argv.get(i).map(AsRef::as_ref) {
        let option = word.to_ascii_uppercase();
        i += 1;
        match option.as_slice() {
            b"BURST" => {
                seen.once("BURST")?;
                set.value.burst = Some(parse_amount(value(argv, &mut i, "BURST")?, "BURST")?);
            }
            b"TTL" => {
                seen.once("TTL")?;
                set.ttl_ms = Some(parse_window(value(argv, &mut i, "TTL")?, "TTL")?.ms());
            }
            b"NOW" if trusted => {
                seen.once("NOW")?;
                let now = parse_plain_u64(value(argv, &mut i, "NOW")?);
                set.replayed_now_ms = Some(now.ok_or(ArgError::BadAmount("NOW"))?);
            }
            other => return Err(foreign_option(name, other, word)),
        }
    }
    Ok(set)
}

/// `RL.OVERRIDE.GET okey`: exactly one key.
pub fn parse_override_get<'a, W>(argv: &'a [W], name: &'static str) -> Result<&'a W, ArgError> {
    match argv {
        [_, okey] => Ok(okey),
        _ => Err(ArgError::WrongArity(name)),
    }
}

/// `RL.OVERRIDE.DEL okey [okey ...]`: at least one key.
pub fn parse_override_del<'a, W>(argv: &'a [W], name: &'static str) -> Result<&'a [W], ArgError> {
    match argv {
        [_, okeys @ ..] if !okeys.is_empty() => Ok(okeys),
        _ => Err(ArgError::WrongArity(name)),
    }
}

/// `RL.OVERRIDE.LIST cursor [MATCH pattern] [COUNT count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListRequest<'a> {
    pub cursor: u64,
    pub pattern: Option<&'a [u8]>,
    pub count: Option<u64>,
}

pub fn parse_override_list<'a, W: AsRef<[u8]>>(
    argv: &'a [W],
    name: &'static str,
) -> Result<ListRequest<'a>, ArgError> {
    let cursor = argv.get(1).ok_or(ArgError::WrongArity(name))?;
    let mut request = ListRequest {
        cursor: parse_plain_u64(cursor.as_ref()).ok_or(ArgError::BadCursor)?,
        pattern: None,
        count: None,
    };
    let mut seen = Seen::default();
    let mut i = 2;
    while let Some(word) = argv.get(i).map(AsRef::as_ref) {
        let option = word.to_ascii_uppercase();
        i += 1;
        match option.as_slice() {
            b"MATCH" => {
                seen.once("MATCH")?;
                request.pattern = Some(value(argv, &mut i, "MATCH")?);
            }
            b"COUNT" => {
                seen.once("COUNT")?;
                request.count = Some(parse_amount(value(argv, &mut i, "COUNT")?, "COUNT")?.get());
            }
            other => return Err(foreign_option(name, other, word)),
        }
    }
    Ok(request)
}
