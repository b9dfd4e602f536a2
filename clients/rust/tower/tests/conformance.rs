//! The conformance runner for librl-tower (conformance/README.md): every
//! case of `conformance/cases/*.json`, over real HTTP to the axum example's
//! policy-file app (what `scripts/serve-example axum` serves) on a free
//! loopback port with the layer built from the case's configuration,
//! against a real `redis-server` with the module (and a
//! real 3-primary cluster for the cluster cases).
//!
//! `CONFORMANCE_CASE=substring` runs only the cases whose name contains it.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{free_port, Cluster, Redis};
use http::{HeaderMap, HeaderValue, Method};
use librl_axum_example::{conformance_resolvers, policy_file_app};
use librl_tower::{Config, RateLimiter, RedisTarget};
use serde_json::{json, Value};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../conformance/cases")
}

/// Every case, file by file in name order.
fn load_cases() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("conformance/cases")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let doc: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            doc["cases"].as_array().cloned().unwrap_or_default()
        })
        .collect()
}

/// The cases conformance/pending.json lists for axum: not passed yet,
/// reported as PENDING instead of run (conformance/README.md, Pending).
fn pending_cases() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../conformance/pending.json");
    let text = std::fs::read_to_string(&path).expect("conformance/pending.json");
    let doc: Value = serde_json::from_str(&text).expect("conformance/pending.json is JSON");
    doc["cases"]["axum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

/// The servers the cases run against; the cluster starts with its first case.
struct Servers {
    standalone: Redis,
    cluster: Option<Cluster>,
}

impl Servers {
    fn primaries(&self, kind: &str) -> Vec<&Redis> {
        match (kind, &self.cluster) {
            ("cluster", Some(c)) => c.nodes.iter().collect(),
            _ => vec![&self.standalone],
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_conformance_case_passes() {
    let filter = std::env::var("CONFORMANCE_CASE").unwrap_or_default();
    let mut servers = Servers {
        standalone: common::redis(),
        cluster: None,
    };
    let (mut passed, mut skipped, mut failures) = (0, Vec::new(), Vec::new());
    let pending = pending_cases();
    let started = Instant::now();
    for case in load_cases() {
        let name = case["name"].as_str().unwrap_or("?").to_string();
        if !name.contains(&filter) {
            continue;
        }
        if pending.contains(&name) {
            eprintln!("conformance: PENDING {name} (conformance/pending.json)");
            skipped.push(format!("{name} (pending)"));
            continue;
        }
        let requires: Vec<&str> = case["requires"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(missing) = requires.iter().find(|r| **r != "fail-local") {
            skipped.push(format!("{name} (requires {missing})"));
            continue;
        }
        let kind = case["redis"].as_str().unwrap_or("standalone");
        // A Redis that hangs and a reload on SIGHUP need the example's own
        // process: the black-box runner checks these against
        // `scripts/serve-example axum` (conformance/README.md).
        let reloads = case["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s.get("reload").is_some());
        if kind == "hang" || reloads {
            skipped.push(format!("{name} (the black-box runner's)"));
            continue;
        }
        if kind == "cluster" && servers.cluster.is_none() {
            servers.cluster = Some(tokio::task::block_in_place(common::cluster));
        }
        let t = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(30), run_case(&case, &servers))
            .await
            .unwrap_or_else(|_| Err("timed out after 30 s".into()));
        match result {
            Ok(()) => {
                passed += 1;
                eprintln!("conformance: ok   {name} ({} ms)", t.elapsed().as_millis());
            }
            Err(why) => {
                eprintln!("conformance: FAIL {name}: {why}");
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    eprintln!(
        "conformance: {passed} passed, {} failed, {} skipped {skipped:?}, in {} ms",
        failures.len(),
        skipped.len(),
        started.elapsed().as_millis()
    );
    assert!(
        failures.is_empty(),
        "failed cases:\n{}",
        failures.join("\n")
    );
    assert!(passed > 0 || !filter.is_empty(), "no case ran");
}

/// The members the case format has (conformance/README.md), per place: a
/// member this runner does not read (`header` for `headers`, a new step
/// kind) fails the case rather than being skipped while the case passes.
fn strict(case: &Value) -> Result<(), String> {
    fn only(what: &str, v: &Value, allowed: &[&str]) -> Result<(), String> {
        let map = v
            .as_object()
            .ok_or_else(|| format!("{what} is not an object"))?;
        match map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(format!("{what} has {k:?}, which this runner does not read")),
            None => Ok(()),
        }
    }
    only(
        "the case",
        case,
        &[
            "name",
            "rule",
            "redis",
            "requires",
            "config",
            "startup_error",
            "cross_field",
            "steps",
        ],
    )?;
    fn request_step(what: &str, step: &Value, allowed: &[&str]) -> Result<(), String> {
        only(what, step, allowed)?;
        only(
            &format!("{what}'s request"),
            &step["request"],
            &[
                "method",
                "path",
                "headers",
                "body",
                "chunked",
                "disconnect_after_ms",
            ],
        )?;
        let expect = step.get("expect").cloned().unwrap_or_else(|| json!({}));
        only(
            &format!("{what}'s expect"),
            &expect,
            &[
                "status",
                "headers",
                "absent",
                "content_type",
                "body",
                "body_text",
                "failed",
                "elapsed_ms",
            ],
        )
    }
    for (i, step) in case["steps"].as_array().into_iter().flatten().enumerate() {
        let what = format!("step {i}");
        if step.get("request").is_some() {
            request_step(&what, step, &["request", "expect", "repeat"])?;
        } else if let Some(inner) = step.get("parallel") {
            only(&what, step, &["parallel"])?;
            let inner = inner
                .as_array()
                .ok_or_else(|| format!("{what}'s parallel is not a list"))?;
            for (j, s) in inner.iter().enumerate() {
                let what = format!("{what}'s parallel request {j}");
                request_step(&what, s, &["request", "expect", "after_ms"])?;
            }
        } else if step.get("redis").is_some() {
            only(&what, step, &["redis", "expect"])?;
        } else {
            let kinds = ["sleep_ms", "redis_pause_ms", "check"];
            let kind = kinds.iter().find(|k| step.get(**k).is_some());
            let kind = kind.ok_or_else(|| format!("{what} is no step this runner knows"))?;
            only(&what, step, &[kind])?;
        }
    }
    Ok(())
}

async fn run_case(case: &Value, servers: &Servers) -> Result<(), String> {
    strict(case)?;
    let config = Config::from_value(&case["config"]);
    if let Some(expected) = case["startup_error"].as_str() {
        // Start-up: reading the document, or building the limiter, fails.
        let built = config.map(|c| {
            conformance_resolvers(RateLimiter::builder(c))
                .build()
                .map(|_| ())
        });
        let message = match built {
            Err(e) => e.to_string(),
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(())) => return Err("the configuration was accepted".into()),
        };
        return if message.contains(expected) {
            Ok(())
        } else {
            Err(format!("the error {message:?} does not name {expected:?}"))
        };
    }
    let config = config.map_err(|e| format!("configuration refused: {e}"))?;
    let kind = case["redis"].as_str().unwrap_or("standalone");
    let target = match kind {
        "standalone" => RedisTarget::Url(servers.standalone.url()),
        "cluster" => RedisTarget::Cluster(servers.cluster.as_ref().ok_or("no cluster")?.urls()),
        "down" => RedisTarget::Url(format!("redis://127.0.0.1:{}/", free_port())),
        other => return Err(format!("unknown redis kind {other:?}")),
    };
    if kind != "down" {
        for node in servers.primaries(kind) {
            command(node, &["FLUSHALL".into()]).await?;
        }
    }
    let limiter = conformance_resolvers(RateLimiter::builder(config))
        .redis(target)
        .build()
        .map_err(|e| e.to_string())?;
    let app = common::serve(policy_file_app(&limiter)).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut paused_until = None;
    let mut result = Ok(());
    for (i, step) in case["steps"].as_array().into_iter().flatten().enumerate() {
        if let Err(why) = run_step(step, &addr, servers, kind, &mut paused_until).await {
            result = Err(format!("step {i} {step}: {why}"));
            break;
        }
    }
    drop(app);
    // A command the app sent during a pause runs when the pause ends: let it
    // land before the next case flushes.
    if let Some(until) = paused_until {
        tokio::time::sleep_until((until + Duration::from_millis(50)).into()).await;
    }
    result
}

async fn run_step(
    step: &Value,
    addr: &str,
    servers: &Servers,
    kind: &str,
    paused_until: &mut Option<Instant>,
) -> Result<(), String> {
    if step.get("request").is_some() {
        return request_step(step.clone(), addr.to_string()).await;
    }
    if let Some(inner) = step.get("parallel").and_then(Value::as_array) {
        // At once (or `after_ms` into the step), each on its own
        // connection; every one is checked.
        let tasks: Vec<_> = inner
            .iter()
            .map(|s| {
                let (s, addr) = (s.clone(), addr.to_string());
                let after = Duration::from_millis(s["after_ms"].as_u64().unwrap_or(0));
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    request_step(s, addr).await
                })
            })
            .collect();
        let mut failed = Vec::new();
        for (j, task) in tasks.into_iter().enumerate() {
            let outcome = task.await.map_err(|e| e.to_string()).and_then(|r| r);
            if let Err(why) = outcome {
                failed.push(format!("parallel request {j}: {why}"));
            }
        }
        return if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        };
    }
    if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        return Ok(());
    }
    if let Some(words) = step.get("redis").and_then(Value::as_array) {
        let words: Vec<String> = words
            .iter()
            .map(|w| {
                w.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| w.to_string())
            })
            .collect();
        let node = owner(servers, kind, &words);
        let reply = command(node, &words).await?;
        return if matches(&step["expect"], &reply) {
            Ok(())
        } else {
            Err(format!("redis replied {reply}"))
        };
    }
    if let Some(ms) = step.get("redis_pause_ms").and_then(Value::as_u64) {
        for node in servers.primaries(kind) {
            let words = ["CLIENT", "PAUSE", &ms.to_string(), "ALL"].map(String::from);
            command(node, &words).await?;
        }
        *paused_until = Some(Instant::now() + Duration::from_millis(ms));
        return Ok(());
    }
    if step.get("check").and_then(Value::as_str) == Some("every_key_expires") {
        for node in servers.primaries(kind) {
            let keys = command(node, &["KEYS".into(), "*".into()]).await?;
            for key in keys.as_array().into_iter().flatten() {
                let key = key.as_str().unwrap_or_default().to_string();
                let ttl = command(node, &["PTTL".into(), key.clone()]).await?;
                if ttl.as_i64().is_none_or(|t| t <= 0) {
                    return Err(format!("{key} has PTTL {ttl}"));
                }
            }
        }
        return Ok(());
    }
    Err("unknown step".into())
}

/// A request step: its request (`repeat` times), each answer checked; or,
/// with `disconnect_after_ms`, the request sent and the connection closed
/// that long after without reading the answer.
async fn request_step(step: Value, addr: String) -> Result<(), String> {
    let request = &step["request"];
    if let Some(ms) = request.get("disconnect_after_ms").and_then(Value::as_u64) {
        return send_and_disconnect(&addr, request, Duration::from_millis(ms)).await;
    }
    let times = step["repeat"].as_u64().unwrap_or(1);
    for n in 0..times {
        if step["expect"]["failed"].as_bool() == Some(true) {
            // The handler failed: a 500, or no answer at all.
            return match send(&addr, request).await {
                Ok((500, ..)) | Err(_) => Ok(()),
                Ok((status, ..)) => Err(format!("status {status}, expected a failed handler")),
            };
        }
        let sent = Instant::now();
        let (status, headers, body) = send(&addr, request).await?;
        let elapsed = sent.elapsed().as_millis();
        if let Some(want) = step["expect"].get("elapsed_ms") {
            if !matches(want, &json!(elapsed)) {
                return Err(format!("request {n}: {elapsed} ms, expected {want}"));
            }
        }
        expect_response(&step["expect"], status, &headers, &body).map_err(|why| {
            format!("request {n}: {why} (status {status}, headers {headers:?}, body {body:?})")
        })?;
    }
    Ok(())
}

/// Writes the request by hand on a connection of its own, waits `after`,
/// and closes the socket unread.
async fn send_and_disconnect(addr: &str, r: &Value, after: Duration) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let method = r["method"].as_str().unwrap_or("GET");
    let path = match r.get("path") {
        Some(p) => bytes(p)?,
        None => b"/".to_vec(),
    };
    let body = r["body"].as_str().unwrap_or_default();
    let mut head = Vec::new();
    head.extend_from_slice(method.as_bytes());
    head.push(b' ');
    head.extend_from_slice(&path);
    head.extend_from_slice(format!(" HTTP/1.1\r\nHost: {addr}\r\n").as_bytes());
    for (name, value) in r["headers"].as_object().into_iter().flatten() {
        let lines = match value {
            Value::Array(lines) => lines.clone(),
            other => vec![other.clone()],
        };
        for line in &lines {
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(&bytes(line)?);
            head.extend_from_slice(b"\r\n");
        }
    }
    head.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("no connection: {e}"))?;
    stream.write_all(&head).await.map_err(|e| e.to_string())?;
    tokio::time::sleep(after).await;
    drop(stream);
    Ok(())
}

/// The node owning the command's first key (RL.OVERRIDE's is after the
/// subcommand); the standalone server outside a cluster.
fn owner<'s>(servers: &'s Servers, kind: &str, words: &[String]) -> &'s Redis {
    let Some(cluster) = servers.cluster.as_ref().filter(|_| kind == "cluster") else {
        return &servers.standalone;
    };
    let first_key = if words[0].eq_ignore_ascii_case("RL.OVERRIDE") {
        2
    } else {
        1
    };
    match words.get(first_key) {
        Some(key) => &cluster.nodes[cluster.owner(librl_client::slot(key.as_bytes()))],
        None => &cluster.nodes[0],
    }
}

/// A command on a fresh connection, its reply as JSON.
async fn command(node: &Redis, words: &[String]) -> Result<Value, String> {
    let client = redis::Client::open(node.url()).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(&words[0]);
    for w in &words[1..] {
        cmd.arg(w);
    }
    let reply: redis::Value = cmd.query_async(&mut con).await.map_err(|e| e.to_string())?;
    Ok(to_json(reply))
}

fn to_json(v: redis::Value) -> Value {
    match v {
        redis::Value::Nil => Value::Null,
        redis::Value::Int(n) => json!(n),
        redis::Value::BulkString(b) => json!(String::from_utf8_lossy(&b)),
        redis::Value::SimpleString(s) => json!(s),
        redis::Value::Okay => json!("OK"),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            Value::Array(items.into_iter().map(to_json).collect())
        }
        other => json!(format!("{other:?}")),
    }
}

/// A JSON string's UTF-8 bytes, or `{"hex": ...}`'s bytes (case requests
/// may give paths and header values as raw bytes).
fn bytes(v: &Value) -> Result<Vec<u8>, String> {
    if let Some(text) = v.as_str() {
        return Ok(text.as_bytes().to_vec());
    }
    let hex = v
        .get("hex")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{v} is neither a string nor {{\"hex\": ...}}"))?;
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{hex:?} is not hex"))
        })
        .collect()
}

/// One request of a case, sent with its request target exactly as written.
async fn send(addr: &str, r: &Value) -> Result<(u16, HeaderMap, String), String> {
    let method = r["method"].as_str().unwrap_or("GET");
    let method = Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    let path = match r.get("path") {
        Some(p) => bytes(p)?,
        None => b"/".to_vec(),
    };
    let mut headers = Vec::new();
    for (name, value) in r["headers"].as_object().into_iter().flatten() {
        let lines = match value {
            Value::Array(lines) => lines.clone(),
            other => vec![other.clone()],
        };
        for line in &lines {
            let value = HeaderValue::from_bytes(&bytes(line)?).map_err(|e| e.to_string())?;
            headers.push((name.clone(), value));
        }
    }
    let body = Bytes::from(r["body"].as_str().unwrap_or_default().to_string());
    let chunked = r["chunked"].as_bool() == Some(true);
    common::send(addr, method, path, headers, body, chunked).await
}

fn expect_response(e: &Value, status: u16, headers: &HeaderMap, body: &str) -> Result<(), String> {
    if let Some(want) = e.get("status").and_then(Value::as_u64) {
        if u64::from(status) != want {
            return Err(format!("status {status}, expected {want}"));
        }
    }
    for (name, want) in e["headers"].as_object().into_iter().flatten() {
        // A header sent on several lines is compared as its lines joined.
        let lines: Vec<&str> = headers
            .get_all(name.as_str())
            .iter()
            .map(|v| v.to_str().unwrap_or("(not text)"))
            .collect();
        if lines.is_empty() {
            return Err(format!("no {name} header, expected {want}"));
        }
        let got = lines.join(", ");
        let got = got.as_str();
        let got = match want.get("range") {
            Some(_) => got.parse::<i64>().map_or(json!(got), |n| json!(n)),
            None => json!(got),
        };
        if !matches(want, &got) {
            return Err(format!("{name}: {got}, expected {want}"));
        }
    }
    for name in e["absent"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        if let Some(v) = headers.get(name) {
            return Err(format!("{name}: {v:?} should be absent"));
        }
    }
    if let Some(want) = e.get("content_type").and_then(Value::as_str) {
        let got = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !got.starts_with(want) {
            return Err(format!("content-type {got:?}, expected {want:?}"));
        }
    }
    if let Some(want) = e.get("body_text").and_then(Value::as_str) {
        if body != want {
            return Err(format!("body {body:?}, expected {want:?}"));
        }
    }
    if let Some(fields) = e.get("body").and_then(Value::as_object) {
        let parsed: Value =
            serde_json::from_str(body).map_err(|_| format!("body {body:?} is not JSON"))?;
        for (field, want) in fields {
            let Some(got) = parsed.get(field) else {
                return Err(format!("body has no {field:?}"));
            };
            if !matches(want, got) {
                return Err(format!("body {field}: {got}, expected {want}"));
            }
        }
    }
    Ok(())
}

/// `want` is a value or a matcher (`range`, `re`, `any`); arrays match
/// element by element.
fn matches(want: &Value, got: &Value) -> bool {
    if let Some(obj) = want.as_object() {
        if obj.get("any").and_then(Value::as_bool) == Some(true) {
            return true;
        }
        if let Some([lo, hi]) = obj
            .get("range")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            return match (got.as_i64(), lo.as_i64(), hi.as_i64()) {
                (Some(n), Some(lo), Some(hi)) => (lo..=hi).contains(&n),
                _ => false,
            };
        }
        if let Some(re) = obj.get("re").and_then(Value::as_str) {
            let Ok(re) = regex::Regex::new(&format!("^(?:{re})$")) else {
                return false;
            };
            return got.as_str().is_some_and(|s| re.is_match(s));
        }
    }
    match (want, got) {
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(w, g)| matches(w, g))
        }
        (Value::Number(w), Value::Number(g)) => {
            w.as_i64() == g.as_i64() && w.as_f64() == g.as_f64()
        }
        _ => want == got,
    }
}
