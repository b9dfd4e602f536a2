//! Sending commands and reading their replies.

use redis::Value;

/// A raw command reply, errors included as values.
pub fn call(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(con).map_err(|e| error_line(&e))
}

/// Convenience: string arguments.
pub fn cmd(con: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    call(con, &bytes)
}

/// A command whose reply is an integer; panics on anything else.
pub fn cmd_int(con: &mut redis::Connection, args: &[&str]) -> i64 {
    match cmd(con, args) {
        Ok(Value::Int(i)) => i,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// A command whose reply is a string; panics on anything else.
pub fn cmd_string(con: &mut redis::Connection, args: &[&str]) -> String {
    let v = cmd(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    redis::from_redis_value(&v).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Asserts that a command replies OK.
#[track_caller]
pub fn ok(con: &mut redis::Connection, args: &[&str]) {
    assert_eq!(cmd(con, args), Ok(Value::Okay), "{args:?}");
}

/// A limiter command's six integers; panics on an error reply.
pub fn limiter(con: &mut redis::Connection, args: &[&str]) -> [i64; 6] {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: Vec<i64> = cmd
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {}", error_line(&e)));
    v.try_into().expect("a limiter reply has six integers")
}

/// An `RL.CONCURRENT` reply's seven integers (the six of every limiter,
/// then the lease id); panics on an error reply.
pub fn lease(con: &mut redis::Connection, args: &[&str]) -> [i64; 7] {
    let reply = cmd(con, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"));
    seven(&reply)
}

/// A concurrency limiter's reply: seven integers.
pub fn seven(v: &Value) -> [i64; 7] {
    ints(v)
        .try_into()
        .unwrap_or_else(|items| panic!("not seven integers: {items:?}"))
}

/// The limiter call `call` (its words separated by a space) replies
/// exactly `want`.
#[track_caller]
pub fn assert_replies(con: &mut redis::Connection, call: &str, want: [i64; 6]) {
    let args: Vec<&str> = call.split(' ').collect();
    assert_eq!(limiter(con, &args), want, "{call}");
}

/// `RL.ALL args...` as `(allowed, retry_after, [six]...)`; panics on an
/// error reply.
pub fn rl_all(con: &mut redis::Connection, args: &[&str]) -> (i64, i64, Vec<[i64; 6]>) {
    let reply = cmd(con, &[&["RL.ALL"], args].concat()).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    all_parts(&reply)
}

/// `RL.ALL args...` as `(allowed, retry_after, [clause reply]...)`, each
/// clause's reply as its integers (seven for a CONCURRENT clause); panics
/// on an error reply.
pub fn rl_all_ints(con: &mut redis::Connection, args: &[&str]) -> (i64, i64, Vec<Vec<i64>>) {
    let reply = cmd(con, &[&["RL.ALL"], args].concat()).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Value::Array(items) = &reply else {
        panic!("not an RL.ALL reply: {reply:?}")
    };
    assert!(items.len() >= 3, "{items:?}");
    (
        int(&items[0]),
        int(&items[1]),
        items[2..].iter().map(ints).collect(),
    )
}

/// The error as the server sent it: `CODE detail`.
pub fn error_line(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// An array of integers.
pub fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(items) => items.iter().map(int).collect(),
        other => panic!("not an array of integers: {other:?}"),
    }
}

/// A limiter reply's six integers.
pub fn six(v: &Value) -> [i64; 6] {
    ints(v)
        .try_into()
        .unwrap_or_else(|items| panic!("not six integers: {items:?}"))
}

/// RL.ALL's `[allowed, retry_after, [six]...]`.
pub fn all_parts(v: &Value) -> (i64, i64, Vec<[i64; 6]>) {
    let Value::Array(items) = v else {
        panic!("not an RL.ALL reply: {v:?}")
    };
    assert!(items.len() >= 3, "{items:?}");
    (
        int(&items[0]),
        int(&items[1]),
        items[2..].iter().map(six).collect(),
    )
}

/// Every string and integer of a reply, flattened in order.
pub fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().flat_map(strings).collect(),
        Value::BulkString(b) => vec![String::from_utf8_lossy(b).into_owned()],
        Value::SimpleString(s) => vec![s.clone()],
        Value::Int(i) => vec![i.to_string()],
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [strings(k), strings(v)].concat())
            .collect(),
        _ => vec![],
    }
}

/// Commands in RESP, as an AOF holds them.
pub fn resp_commands<'a>(commands: impl IntoIterator<Item = Vec<&'a [u8]>>) -> Vec<u8> {
    let mut out = Vec::new();
    for args in commands {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

/// A limiter call and `PTTL` of its key in one MULTI, so that both read
/// the server's clock at the same moment however busy the machine is.
/// (The reply's times are the module's clock during the command, PTTL's the
/// server's command-time snapshot: either can be a millisecond ahead, so
/// callers compare them within a tolerance both ways.)
pub fn limiter_then_pttl(con: &mut redis::Connection, args: &[&str]) -> ([i64; 6], i64) {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd(args[0])
        .arg(&args[1..])
        .cmd("PTTL")
        .arg(args[1]);
    let (reply, pttl): (Vec<i64>, i64) = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {}", error_line(&e)));
    let reply = reply.try_into().expect("a limiter reply has six integers");
    (reply, pttl)
}

/// RL.OVERRIDE.LIST's entries: each okey with its four integers
/// (`[limit, window_ms, burst, ttl_ms]`).
pub type Listed = Vec<(Vec<u8>, Vec<i64>)>;

/// Every entry of a full RL.OVERRIDE.LIST iteration with `options`, from
/// cursor 0 back to 0 (duplicates included), or the first error line.
pub fn try_list_overrides(
    con: &mut redis::Connection,
    options: &[&[u8]],
) -> Result<Listed, String> {
    let mut cursor = b"0".to_vec();
    let mut entries = Vec::new();
    for _ in 0..100_000 {
        let mut args: Vec<&[u8]> = vec![b"RL.OVERRIDE.LIST", &cursor];
        args.extend(options);
        let reply = call(con, &args)?;
        let (next, found): (Vec<u8>, Vec<Value>) =
            redis::from_redis_value(&reply).unwrap_or_else(|e| panic!("{reply:?}: {e}"));
        std::str::from_utf8(&next)
            .ok()
            .and_then(|c| c.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("the cursor is not a number: {reply:?}"));
        for entry in found {
            let Value::Array(mut parts) = entry else {
                panic!("an entry is an array: {entry:?}");
            };
            let name: Vec<u8> = redis::from_redis_value(&parts.remove(0)).unwrap();
            let fields = ints(&Value::Array(parts));
            assert_eq!(fields.len(), 4, "an entry has five fields");
            entries.push((name, fields));
        }
        if next == b"0" {
            return Ok(entries);
        }
        cursor = next;
    }
    panic!("RL.OVERRIDE.LIST {options:?} never returned cursor 0");
}

/// `try_list_overrides`, panicking on an error reply.
pub fn list_overrides(con: &mut redis::Connection, options: &[&[u8]]) -> Listed {
    try_list_overrides(con, options).unwrap_or_else(|e| panic!("RL.OVERRIDE.LIST {options:?}: {e}"))
}
