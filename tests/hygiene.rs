//! Expiry hygiene: after a seeded random mix of every command (a few
//! thousand calls over 50 keys of each limiter kind, overrides set with and
//! without TTL and deleted, changing limits and windows, PEEK, denied calls,
//! RL.ALL), every limiter key expires exactly when its limiter is empty
//! again, and the only keys without expiry are overrides set without TTL.
//!
//! The check, per limiter key: PEEK it with the effective parameters of the
//! last call that wrote it (denied calls and PEEK write nothing, so they
//! cannot move the expiry) and `COST limit+1`, which is always denied and
//! so replies the state as it stands: its reset_after `R` is the time until
//! the limiter is empty. Then `PTTL` must be in `[R - elapsed - 1, R]`:
//!
//! * `PTTL <= R` with no tolerance: both are the same absolute time minus the
//!   server's wall clock in ms, and PTTL runs after the PEEK replied, so its
//!   clock reads the same or later;
//! * `PTTL >= R - elapsed - 1`: the server's clock cannot advance between
//!   the two commands more than the client's own elapsed time (send of the
//!   PEEK to reply of PTTL, rounded up), plus one for the two readings being
//!   truncated to whole milliseconds. So keys do not expire early either.
//!
//! PTTL -1 (no expiry) fails; -2 (gone) requires `R <= elapsed + 1`.

mod common;

use common::*;
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

const KEYS_PER_KIND: u64 = 50;
const OKEYS: u64 = 8;
const STEPS: usize = 3000;
const DEFAULT_SEED: u64 = 0x7a11_0c8e_0007;

/// splitmix64: small, seeded, good enough to pick test cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Fixed,
    Sliding,
    Approx,
    Token,
}

const KINDS: [Kind; 4] = [Kind::Fixed, Kind::Sliding, Kind::Approx, Kind::Token];

impl Kind {
    fn command(self) -> &'static str {
        match self {
            Kind::Fixed => "RL.FIXED",
            Kind::Sliding | Kind::Approx => "RL.SLIDING",
            Kind::Token => "RL.TOKEN",
        }
    }
    fn clause(self) -> &'static str {
        &self.command()[3..]
    }
    fn prefix(self) -> &'static str {
        match self {
            Kind::Fixed => "fx",
            Kind::Sliding => "sl",
            Kind::Approx => "ap",
            Kind::Token => "tk",
        }
    }
}

/// A call's own windows, and an override's: written with units, as users do.
const WINDOWS: [(&str, u64); 7] = [
    ("40ms", 40),
    ("150ms", 150),
    ("1s", 1000),
    ("3s", 3000),
    ("1m", 60_000),
    ("1h", 3_600_000),
    ("1d", 86_400_000),
];
const OVERRIDE_WINDOWS: [(&str, u64); 5] = [
    ("60ms", 60),
    ("250ms", 250),
    ("2s", 2000),
    ("90s", 90_000),
    ("2h", 7_200_000),
];
const TTLS: [&str; 4] = ["30ms", "200ms", "1s", "1h"];
/// Mostly small; 12 and 41 exceed every own limit (at most 10) and 41 every
/// override (at most 40), so some calls can never fit.
const COSTS: [u64; 9] = [1, 1, 1, 1, 2, 2, 3, 12, 41];

/// A limiter's parameters. Own limits and capacities are 1..=10, an
/// override's 11..=40, so the reply's limit says which applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    kind: Kind,
    amount: u64,
    window_ms: u64,
    /// How the window is written in the call (the effective one is ms).
    window_text: &'static str,
    burst: Option<u64>,
    aligned: bool,
}

impl Params {
    fn random(rng: &mut Rng, kind: Kind) -> Params {
        let (window_text, window_ms) = rng.pick(&WINDOWS);
        Params {
            kind,
            amount: rng.range(1, 10),
            window_ms,
            window_text,
            burst: (kind == Kind::Token && rng.chance(50)).then(|| rng.range(1, 10)),
            aligned: kind == Kind::Fixed && rng.chance(50),
        }
    }

    /// The limit the reply reports: TOKEN's is its capacity.
    fn limit(&self) -> u64 {
        match self.kind {
            Kind::Token => self.burst.unwrap_or(self.amount),
            _ => self.amount,
        }
    }

    /// `amount window [ALIGNED] [APPROX] [BURST b]`, window in ms when
    /// `exact` (for the final PEEK), else as the call wrote it.
    fn args(&self, exact: bool) -> Vec<String> {
        let window = if exact {
            format!("{}ms", self.window_ms)
        } else {
            self.window_text.to_string()
        };
        let mut args = vec![self.amount.to_string(), window];
        if self.aligned {
            args.push("ALIGNED".into());
        }
        if self.kind == Kind::Approx {
            args.push("APPROX".into());
        }
        if let Some(b) = self.burst {
            args.extend(["BURST".to_string(), b.to_string()]);
        }
        args
    }
}

/// An override as last set by the test.
#[derive(Clone, Copy, Debug)]
struct Override {
    limit: u64,
    window_ms: u64,
    burst: Option<u64>,
    ttl: bool,
}

/// One limiter clause as sent.
#[derive(Clone, Debug)]
struct Clause {
    key: String,
    own: Params,
    okey: Option<String>,
    cost: u64,
}

impl Clause {
    fn random(rng: &mut Rng, kind: Kind) -> Clause {
        Clause {
            key: format!("{}:{}", kind.prefix(), rng.below(KEYS_PER_KIND)),
            own: Params::random(rng, kind),
            okey: rng.chance(40).then(|| format!("o:{}", rng.below(OKEYS))),
            cost: rng.pick(&COSTS),
        }
    }

    /// Everything after the key, options in a varying order.
    fn options(&self, rng: &mut Rng) -> Vec<String> {
        let mut args = self.own.args(false);
        let mut options = vec![vec!["COST".to_string(), self.cost.to_string()]];
        if let Some(okey) = &self.okey {
            options.push(vec!["OVERRIDE".to_string(), okey.clone()]);
        }
        if rng.chance(50) {
            options.reverse();
        }
        args.extend(options.into_iter().flatten());
        args
    }
}

struct Mix {
    rng: Rng,
    overrides: HashMap<String, Override>,
    /// Every limiter key written, with the effective parameters of the
    /// last call that wrote it.
    written: BTreeMap<String, Params>,
    calls: usize,
    denied: usize,
    peeks: usize,
    overridden: usize,
}

impl Mix {
    /// The parameters that applied to an admitted clause, told apart by the
    /// limit in its reply.
    fn effective(&self, clause: &Clause, reply: &[i64; 6]) -> Params {
        let own = clause.own;
        if reply[3] == own.limit() as i64 {
            return own;
        }
        let o = clause
            .okey
            .as_ref()
            .and_then(|k| self.overrides.get(k))
            .unwrap_or_else(|| {
                panic!("{clause:?} replied {reply:?}: neither its limit nor an override's")
            });
        let p = Params {
            amount: o.limit,
            window_ms: o.window_ms,
            window_text: "",
            burst: if own.kind == Kind::Token {
                o.burst
            } else {
                None
            },
            ..own
        };
        assert_eq!(
            p.limit() as i64,
            reply[3],
            "{clause:?} with {o:?}: {reply:?}"
        );
        p
    }

    fn record(&mut self, clause: &Clause, reply: &[i64; 6], peek: bool) {
        self.calls += 1;
        assert!(reply[0] == 0 || reply[0] == 1, "{clause:?}: {reply:?}");
        if reply[0] == 0 {
            self.denied += 1;
        }
        if peek {
            self.peeks += 1;
        }
        let effective = self.effective(clause, reply);
        if effective != clause.own {
            self.overridden += 1;
        }
        if reply[0] == 1 && !peek {
            self.written.insert(clause.key.clone(), effective);
        }
    }

    fn limiter_call(&mut self, con: &mut redis::Connection) {
        let kind = self.rng.pick(&KINDS);
        let clause = Clause::random(&mut self.rng, kind);
        let peek = self.rng.chance(10);
        let mut args = vec![kind.command().to_string(), clause.key.clone()];
        args.extend(clause.options(&mut self.rng));
        if peek {
            args.push("PEEK".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = limiter(con, &args);
        self.record(&clause, &reply, peek);
    }

    fn all_call(&mut self, con: &mut redis::Connection) {
        let n = self.rng.range(1, 4);
        let mut clauses: Vec<Clause> = Vec::new();
        while clauses.len() < n as usize {
            let kind = self.rng.pick(&KINDS);
            let c = Clause::random(&mut self.rng, kind);
            let clash = clauses
                .iter()
                .any(|o| o.key == c.key || (o.okey.is_some() && o.okey == c.okey));
            if !clash {
                clauses.push(c);
            }
        }
        let peek = self.rng.chance(10);
        let mut args = vec!["RL.ALL".to_string()];
        for c in &clauses {
            args.extend([c.own.kind.clause().to_string(), c.key.clone()]);
            args.extend(c.options(&mut self.rng));
        }
        if peek {
            args.push("PEEK".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = cmd(con, &args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let Value::Array(items) = reply else {
            panic!("{args:?}: {reply:?}")
        };
        let ints = |v: &Value| -> Vec<i64> {
            match v {
                Value::Array(items) => items
                    .iter()
                    .map(|i| match i {
                        Value::Int(i) => *i,
                        other => panic!("{args:?}: {other:?}"),
                    })
                    .collect(),
                other => panic!("{args:?}: {other:?}"),
            }
        };
        assert_eq!(items.len(), 2 + clauses.len(), "{args:?}: {items:?}");
        let allowed = matches!(items[0], Value::Int(1));
        for (c, r) in clauses.iter().zip(&items[2..]) {
            let r: [i64; 6] = ints(r).try_into().unwrap();
            // A clause's own reply says allowed; the call records only when
            // every clause admitted.
            let mut as_recorded = r;
            if !allowed {
                as_recorded[0] = 0;
            }
            self.record(c, &as_recorded, peek);
        }
    }

    fn set_override(&mut self, con: &mut redis::Connection) {
        let okey = format!("o:{}", self.rng.below(OKEYS));
        let (window_text, window_ms) = self.rng.pick(&OVERRIDE_WINDOWS);
        let o = Override {
            limit: self.rng.range(11, 30),
            window_ms,
            burst: self.rng.chance(50).then(|| self.rng.range(31, 40)),
            ttl: self.rng.chance(50),
        };
        let mut args = vec![
            "RL.OVERRIDE.SET".to_string(),
            okey.clone(),
            o.limit.to_string(),
            window_text.to_string(),
        ];
        if let Some(b) = o.burst {
            args.extend(["BURST".to_string(), b.to_string()]);
        }
        if o.ttl {
            args.extend(["TTL".to_string(), self.rng.pick(&TTLS).to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(cmd(con, &args), Ok(Value::Okay), "{args:?}");
        self.overrides.insert(okey, o);
    }

    fn del_override(&mut self, con: &mut redis::Connection) {
        let okey = format!("o:{}", self.rng.below(OKEYS));
        let deleted = cmd(con, &["RL.OVERRIDE.DEL", &okey]).unwrap();
        let known = self.overrides.remove(&okey);
        // A TTL'd override may have expired; one without TTL must be there.
        if known.is_some_and(|o| !o.ttl) {
            assert_eq!(deleted, Value::Int(1), "{okey}");
        }
    }

    /// A PEEK of another kind's key: WRONGTYPE when it exists, else a
    /// reply that creates nothing.
    fn wrong_kind_peek(&mut self, con: &mut redis::Connection) {
        let owner = self.rng.pick(&KINDS);
        let key = format!("{}:{}", owner.prefix(), self.rng.below(KEYS_PER_KIND));
        let kind = self.rng.pick(&KINDS);
        if kind == owner {
            return;
        }
        let mut args = vec![kind.command().to_string(), key.clone()];
        args.extend(Params::random(&mut self.rng, kind).args(false));
        args.push("PEEK".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match cmd(con, &args) {
            Err(e) => assert!(e.starts_with("WRONGTYPE "), "{args:?}: {e}"),
            Ok(_) => assert_eq!(
                cmd(con, &["EXISTS", &key]),
                Ok(Value::Int(0)),
                "{args:?} created its key"
            ),
        }
    }

    fn step(&mut self, con: &mut redis::Connection) {
        match self.rng.below(100) {
            0..=54 => self.limiter_call(con),
            55..=74 => self.all_call(con),
            75..=88 => self.set_override(con),
            89..=93 => self.del_override(con),
            _ => self.wrong_kind_peek(con),
        }
    }

    /// The invariants of the module docs: every key accounted for, every
    /// limiter key expiring exactly when its limiter is empty.
    fn check_keys(&self, con: &mut redis::Connection, what: &str) {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
        let mut with_expiry = 0;
        for key in &keys {
            let pttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
            if key.starts_with("o:") {
                let o = self
                    .overrides
                    .get(key)
                    .unwrap_or_else(|| panic!("{what}: override {key} should not exist"));
                if o.ttl {
                    assert!(
                        pttl >= 0 || pttl == -2,
                        "{what}: {key} {o:?} has PTTL {pttl}"
                    );
                } else {
                    assert_eq!(pttl, -1, "{what}: {key} {o:?} was set without TTL");
                }
            } else {
                assert!(
                    self.written.contains_key(key),
                    "{what}: {key} exists but no admitted call wrote it"
                );
                assert_ne!(pttl, -1, "{what}: limiter key {key} has no expiry");
                with_expiry += 1;
            }
        }
        let mut exact = 0;
        for (key, p) in &self.written {
            let mut peek = vec![p.kind.command().to_string(), key.clone()];
            peek.extend(p.args(true));
            peek.push("PEEK".into());
            let mut state = peek.clone();
            state.extend(["COST".to_string(), (p.limit() + 1).to_string()]);
            let peek: Vec<&str> = peek.iter().map(String::as_str).collect();
            let state: Vec<&str> = state.iter().map(String::as_str).collect();
            let started = Instant::now();
            let plain = limiter(con, &peek);
            let now = limiter(con, &state);
            let pttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
            let elapsed = started.elapsed().as_micros().div_ceil(1000) as i64;
            assert_eq!(
                (now[0], now[2]),
                (0, -1),
                "{what}: {state:?} must be refused outright: {now:?}"
            );
            let r = now[5];
            assert!(
                plain[5] >= r,
                "{what}: {peek:?} replied {plain:?}, its state {now:?}"
            );
            match pttl {
                -1 => panic!("{what}: {key} has no expiry"),
                -2 => assert!(
                    r <= elapsed + 1,
                    "{what}: {key} vanished {r} ms before its limiter {p:?} was empty ({now:?})"
                ),
                pttl => {
                    assert!(
                        pttl <= r,
                        "{what}: {key} lives {pttl} ms, longer than its limiter's {r} ms ({p:?}, {now:?})"
                    );
                    assert!(
                        pttl >= r - elapsed - 1,
                        "{what}: {key} lives {pttl} ms, shorter than its limiter's {r} ms ({p:?}, {now:?}, {elapsed} ms between)"
                    );
                    exact += 1;
                }
            }
        }
        eprintln!(
            "{what}: {} keys ({with_expiry} limiters with expiry, {exact} matching their reset_after, {} limiter keys written in all)",
            keys.len(),
            self.written.len()
        );
    }
}

#[test]
fn every_limiter_key_expires_when_its_limiter_is_empty() {
    let seed = std::env::var("LIBRL_HYGIENE_SEED")
        .ok()
        .map(|s| s.parse().expect("LIBRL_HYGIENE_SEED is a u64"))
        .unwrap_or(DEFAULT_SEED);
    on_each_server(|server, con| {
        let what = format!("{:?} seed {seed}", server.flavor);
        let mut mix = Mix {
            rng: Rng(seed),
            overrides: HashMap::new(),
            written: BTreeMap::new(),
            calls: 0,
            denied: 0,
            peeks: 0,
            overridden: 0,
        };
        for step in 1..=STEPS {
            mix.step(con);
            if step % 100 == 0 {
                // Let short windows and TTLs run out now and then.
                let pause = mix.rng.below(60);
                std::thread::sleep(Duration::from_millis(pause));
            }
            if step == STEPS / 2 {
                mix.check_keys(con, &format!("{what} half-way"));
            }
        }
        mix.check_keys(con, &what);
        eprintln!(
            "{what}: {} limiter clauses, {} denied, {} PEEK, {} under an override; {} overrides at the end",
            mix.calls,
            mix.denied,
            mix.peeks,
            mix.overridden,
            mix.overrides.len()
        );
        assert!(mix.denied > STEPS / 20 && mix.overridden > STEPS / 20);
    });
}
