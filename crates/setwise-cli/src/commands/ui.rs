//! `setwise ui`: a local web page that runs both parties and shows each step.
//!
//! The server runs the two roles for real, over loopback TCP in this process; the page
//! (one embedded HTML file, no external asset) only sends the two sets and the job, then
//! polls the run's events: each party's phases, every frame that crosses the wire with
//! its size, the streams' progress, and at the end the result beside the plain
//! computation, both reports and what the protocol reveals.
//!
//! API (JSON): `POST /api/parse {text, format}` checks one party's set;
//! `POST /api/run {protocol, operation, receiver: {text, format}, sender: {…}}` starts a
//! run and answers `{id}`; `GET /api/runs/ID?since=N` gives the events from the N-th on,
//! and the result or the error once the run has ended.
//!
//! Only the page may drive the server ([`Guard`]): another web page open in the same
//! browser can send requests to loopback, and through DNS rebinding (its own name
//! resolving to 127.0.0.1) read the answers. So every request must name this server in
//! `Host` (a rebinding page's requests name its own host); a request marked with another
//! `Origin` is refused; a POST must be `application/json` (a cross-site page cannot send
//! that without a CORS preflight, which is never granted) and, like a run's events, carry
//! the token this start of the server embeds in its page (`X-Setwise-Token`). Run ids are
//! 128 random bits, and runs at once are capped.

use crate::Failure;
use crate::net::loopback;
use clap::Args;
use serde::Deserialize;
use serde_json::{Value, json};
use setwise::crypto::rng::fill_os;
use setwise::io::hex;
use setwise::net::{Channel, Decorated, Decoration, NetError, is_loopback};
use setwise::protocols::spec::Takes;
use setwise::protocols::{PhaseObserver, Progress, Spec, registry};
use setwise::session::{Input, Job, run_observed};
use setwise::wire::text::printable;
use setwise::{Operation, Outcome, Protocol, Report, Role};
use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tiny_http::{Header, Method, Request, Response, Server};

/// `setwise ui`.
#[derive(Args)]
pub struct UiArgs {
    /// Address to serve the page on (keep it on loopback: the page runs jobs for anyone
    /// who reaches it).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Runs at once; another is refused (429) until one ends.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=KEPT_RUNS as i64))]
    max_runs: u16,
    /// Also serve requests addressed to HOST:PORT (the name a browser uses for a server
    /// off loopback). On loopback the page answers to 127.0.0.1, localhost and [::1] at
    /// its port.
    #[arg(long, value_name = "HOST:PORT")]
    allow_host: Vec<String>,
}

/// The page: HTML, CSS and script in one file.
const PAGE: &str = include_str!("../ui/index.html");
/// Largest request body: two sets of text.
const MAX_BODY: u64 = 64 << 20;
/// Most items a party may bring to the page (a protocol may take fewer: its
/// `Spec::demo_items`).
const MAX_ITEMS: usize = 1 << 20;
/// Events kept per run; frames beyond are counted, not listed.
const MAX_EVENTS: usize = 5000;
/// Runs kept for polling; the oldest that has ended is forgotten first.
const KEPT_RUNS: usize = 16;
/// Where the server writes the page's token.
const TOKEN_SLOT: &str = "{{SETWISE_TOKEN}}";
/// Header carrying the token.
const TOKEN_HEADER: &str = "X-Setwise-Token";
/// The page on `--reveal both`, which is no protocol's own; the protocols' pages come
/// from the registry, served under /docs/NAME.md.
const REVEAL_PAGE: (&str, &str) = ("reveal", include_str!("../../../../docs/protocols/reveal.md"));

/// The protocols the page offers: those where both parties bring only their items.
fn offered() -> impl Iterator<Item = &'static Spec> {
    let items = |s: &Spec, op| [Role::Sender, Role::Receiver].iter().all(|&r| s.takes(op, r) == Takes::Items);
    registry::ALL.iter().copied().filter(move |s| items(s, Operation::Intersection))
}

/// One party's set as the page sends it.
#[derive(Deserialize)]
struct SetText {
    text: String,
    /// `csv` (a header, the key in the first column) or `lines` (one item per line).
    format: String,
}

#[derive(Deserialize)]
struct RunRequest {
    protocol: String,
    operation: String,
    receiver: SetText,
    sender: SetText,
}

/// What a run has shown so far.
#[derive(Default)]
struct RunState {
    events: Vec<Value>,
    dropped: u64,
    done: bool,
    result: Option<Value>,
    error: Option<String>,
}

type Shared = Arc<Mutex<RunState>>;

/// The runs the server keeps, by id.
type Runs = Vec<(String, Shared)>;

/// Runs `setwise ui`.
pub fn run_ui(a: UiArgs) -> Result<(), Failure> {
    let server = Server::http(&a.listen).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", a.listen)))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| Failure::usage(anyhow::anyhow!("{}: not an IP address", a.listen)))?;
    let guard = Guard::new(addr, &a.allow_host);
    let page = PAGE.replacen(TOKEN_SLOT, &guard.token, 1);
    eprintln!("setwise ui: open http://{} (Ctrl-C to stop)", guard.hosts[0]);
    if !is_loopback(&a.listen) {
        eprintln!("warning: {} is not a loopback address: anyone who reaches it can run jobs here", a.listen);
    }
    let mut runs = Runs::new();
    for mut request in server.incoming_requests() {
        let (status, body, kind) = match guard.check(&request) {
            Ok(()) => route(&mut request, &page, &mut runs, usize::from(a.max_runs)),
            Err((status, e)) => {
                // Read (a bounded part of) the body first: closing a socket with unread
                // bytes resets it, and the client may lose the refusal.
                let _ = std::io::copy(&mut request.as_reader().take(1 << 20), &mut std::io::sink());
                (status, json!({ "error": e }).to_string().into_bytes(), "application/json")
            }
        };
        let header = |k: &str, v: &str| Header::from_bytes(k, v).expect("valid header");
        let response = Response::from_data(body)
            .with_status_code(status)
            .with_header(header("Content-Type", kind))
            .with_header(header("Cache-Control", "no-store"))
            .with_header(header("X-Content-Type-Options", "nosniff"))
            .with_header(header("X-Frame-Options", "DENY"))
            .with_header(header("Content-Security-Policy", "frame-ancestors 'none'"))
            .with_header(header("Referrer-Policy", "no-referrer"));
        // A client that went away is no concern of the server.
        let _ = request.respond(response);
    }
    Ok(())
}

/// What a request must show before the server looks at it: that it is addressed to
/// this server, comes from its page, and (to change or read runs) carries the page's
/// token in a JSON request.
struct Guard {
    /// `Host` values naming this server, lower case; the first is the one to open.
    hosts: Vec<String>,
    /// The token embedded in the page: 128 bits from the OS, hex.
    token: String,
}

impl Guard {
    fn new(addr: SocketAddr, extra: &[String]) -> Self {
        let port = addr.port();
        let mut names = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            names.extend([format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]);
        }
        names.extend(extra.iter().cloned());
        if port == 80 {
            // Browsers leave the default port out of Host and Origin.
            let bare: Vec<String> = names.iter().filter_map(|h| h.strip_suffix(":80").map(str::to_string)).collect();
            names.extend(bare);
        }
        let mut hosts: Vec<String> = Vec::new();
        for name in names {
            let name = name.to_ascii_lowercase();
            if !hosts.contains(&name) {
                hosts.push(name);
            }
        }
        Self { hosts, token: random_hex() }
    }

    /// `Ok` if the request may be routed; else the status and the reason.
    fn check(&self, request: &Request) -> Result<(), (u16, String)> {
        let header = |name: &'static str| -> Result<Option<&str>, (u16, String)> {
            let mut values = request.headers().iter().filter(|h| h.field.equiv(name));
            match (values.next(), values.next()) {
                (Some(_), Some(_)) => Err((400, format!("more than one {name} header"))),
                (v, _) => Ok(v.map(|h| h.value.as_str().trim())),
            }
        };
        let host = header("Host")?.unwrap_or("").to_ascii_lowercase();
        if !self.hosts.contains(&host) {
            let shown = if host.is_empty() { "none".to_string() } else { printable(&host, 64) };
            return Err((
                421,
                format!("this server answers only to requests for {} (Host: {shown})", self.hosts.join(", ")),
            ));
        }
        if let Some(origin) = header("Origin")? {
            let same =
                origin.to_ascii_lowercase().strip_prefix("http://").is_some_and(|o| self.hosts.iter().any(|h| h == o));
            if !same {
                return Err((403, format!("requests from another origin ({}) are refused", printable(origin, 64))));
            }
        }
        let needs_token = match request.method() {
            Method::Post => {
                let kind = header("Content-Type")?.unwrap_or("");
                let media = kind.split(';').next().unwrap_or("").trim();
                if !media.eq_ignore_ascii_case("application/json") {
                    let shown = printable(kind, 64);
                    return Err((415, format!("a request body must be application/json, not {shown:?}")));
                }
                true
            }
            // The page and the protocol list hold no secret; a run's events do.
            Method::Get => request.url().starts_with("/api/runs/"),
            _ => return Err((405, "only GET and POST are served".into())),
        };
        if !needs_token {
            return Ok(());
        }
        // Hashes compare in constant time: the token does not leak byte by byte.
        let given = header(TOKEN_HEADER)?.unwrap_or("");
        if blake3::hash(given.as_bytes()) != blake3::hash(self.token.as_bytes()) {
            let what = if given.is_empty() { "lacks" } else { "has the wrong" };
            return Err((403, format!("the request {what} token ({TOKEN_HEADER}): reload the page")));
        }
        Ok(())
    }
}

/// 128 bits from the OS CSPRNG, as 32 hex digits.
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    fill_os(&mut bytes);
    hex(&bytes)
}

/// Status, body and content type of the answer to `request` (which passed the [`Guard`]).
fn route(request: &mut Request, page: &str, runs: &mut Runs, max_runs: usize) -> (u16, Vec<u8>, &'static str) {
    const JSON: &str = "application/json";
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let bad = |status: u16, e: String| (status, json!({ "error": e }).to_string().into_bytes(), JSON);
    match (request.method(), path) {
        (Method::Get, "/") => (200, page.as_bytes().to_vec(), "text/html; charset=utf-8"),
        (Method::Get, "/api/protocols") => {
            let list: Vec<Value> = offered()
                .map(|s| {
                    let ops: Vec<&str> = s
                        .operations
                        .iter()
                        .filter(|o| matches!(o, Operation::Intersection | Operation::Cardinality | Operation::Union))
                        .map(|o| o.name())
                        .collect();
                    let default = std::ptr::eq(s, registry::DEFAULT);
                    json!({ "name": s.name, "max_set": s.demo_items, "operations": ops, "default": default })
                })
                .collect();
            (200, Value::Array(list).to_string().into_bytes(), JSON)
        }
        (Method::Get, p) if p.starts_with("/docs/") => {
            let name = p.trim_start_matches("/docs/").trim_end_matches(".md");
            let page = offered().find(|s| s.name == name).map(|s| s.page);
            match page.or((name == REVEAL_PAGE.0).then_some(REVEAL_PAGE.1)) {
                Some(text) => (200, text.as_bytes().to_vec(), "text/plain; charset=utf-8"),
                None => bad(404, format!("no page {name}")),
            }
        }
        (Method::Post, "/api/parse") => match body::<SetText>(request).and_then(|s| parse_set(&s)) {
            Ok((items, duplicates)) => {
                let sample: Vec<String> =
                    items.iter().take(5).map(|i| String::from_utf8_lossy(i).into_owned()).collect();
                let answer = json!({ "count": items.len(), "duplicates": duplicates, "sample": sample });
                (200, answer.to_string().into_bytes(), JSON)
            }
            Err(e) => bad(400, e),
        },
        (Method::Post, "/api/run") => {
            let ended = |s: &Shared| s.lock().unwrap_or_else(PoisonError::into_inner).done;
            let running = runs.iter().filter(|(_, s)| !ended(s)).count();
            if running >= max_runs {
                let (n, are) = if running == 1 { ("run", "is") } else { ("runs", "are") };
                return bad(
                    429,
                    format!(
                        "{running} {n} {are} already running (the server takes {max_runs} at once): start this one \
                         when one has ended"
                    ),
                );
            }
            match body::<RunRequest>(request).and_then(start) {
                Ok(state) => {
                    let id = random_hex();
                    runs.push((id.clone(), state));
                    if runs.len() > KEPT_RUNS {
                        // Runs still going are kept (at most max_runs ≤ KEPT_RUNS of them).
                        if let Some(old) = runs.iter().position(|(_, s)| ended(s)) {
                            runs.remove(old);
                        }
                    }
                    (200, json!({ "id": id }).to_string().into_bytes(), JSON)
                }
                Err(e) => bad(400, e),
            }
        }
        (Method::Get, p) if p.starts_with("/api/runs/") => {
            let id = p.trim_start_matches("/api/runs/");
            let since: usize = query.strip_prefix("since=").and_then(|s| s.parse().ok()).unwrap_or(0);
            match runs.iter().find(|(i, _)| i == id) {
                Some((_, s)) => {
                    let s = s.lock().unwrap_or_else(PoisonError::into_inner);
                    let answer = json!({
                        "events": s.events.get(since..).unwrap_or(&[]),
                        "next": s.events.len(),
                        "dropped": s.dropped,
                        "done": s.done,
                        "result": s.result,
                        "error": s.error,
                    });
                    (200, answer.to_string().into_bytes(), JSON)
                }
                None => bad(404, format!("no such run (the server keeps the last {KEPT_RUNS})")),
            }
        }
        _ => bad(404, format!("nothing at {path}")),
    }
}

/// The request's JSON body as `T`.
fn body<T: for<'de> Deserialize<'de>>(request: &mut Request) -> Result<T, String> {
    let mut text = String::new();
    request
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the request: {e}"))?;
    if text.len() as u64 > MAX_BODY {
        return Err(format!("the request is larger than {} MB", MAX_BODY >> 20));
    }
    serde_json::from_str(&text).map_err(|e| format!("bad request: {e}"))
}

/// One party's distinct items, and how many repeats were dropped.
fn parse_set(s: &SetText) -> Result<(Vec<Vec<u8>>, usize), String> {
    let mut items = Vec::new();
    match s.format.as_str() {
        "lines" => items.extend(s.text.lines().map(str::trim).filter(|l| !l.is_empty()).map(|l| l.as_bytes().to_vec())),
        "csv" => {
            let mut reader = csv::ReaderBuilder::new().from_reader(s.text.as_bytes());
            let headers = reader.headers().map_err(|e| format!("bad CSV: {e}"))?.clone();
            if headers.is_empty() {
                return Err("bad CSV: no header row (the first line names the columns; the key is the first)".into());
            }
            for record in reader.records() {
                let record = record.map_err(|e| match e.kind() {
                    csv::ErrorKind::UnequalLengths { pos, expected_len, len } => format!(
                        "bad CSV: line {} has {len} fields, the header has {expected_len}",
                        pos.as_ref().map_or(0, |p| p.line())
                    ),
                    _ => format!("bad CSV: {e}"),
                })?;
                let key = record.get(0).unwrap_or("").trim();
                if !key.is_empty() {
                    items.push(key.as_bytes().to_vec());
                }
            }
        }
        other => return Err(format!("unknown format {other:?}: csv or lines")),
    }
    let before = items.len();
    let mut seen = HashSet::with_capacity(items.len());
    items.retain(|i| seen.insert(i.clone()));
    if items.len() > MAX_ITEMS {
        return Err(format!("{} items: the page takes at most {MAX_ITEMS} per party", items.len()));
    }
    let dropped = before - items.len();
    Ok((items, dropped))
}

/// Checks a run request and starts it on its own thread.
fn start(r: RunRequest) -> Result<Shared, String> {
    let protocol: Protocol = r.protocol.parse().map_err(|_| format!("unknown protocol {:?}", r.protocol))?;
    let operation: Operation = r.operation.parse().map_err(|_| format!("unknown operation {:?}", r.operation))?;
    let (receiver, _) = parse_set(&r.receiver).map_err(|e| format!("receiver: {e}"))?;
    let (sender, _) = parse_set(&r.sender).map_err(|e| format!("sender: {e}"))?;
    let max = offered().find(|s| s.protocol() == protocol).map(|s| s.demo_items).ok_or("protocol not offered")?;
    if receiver.len().max(sender.len()) > max {
        return Err(format!("{protocol} takes sets of at most {max} items here"));
    }
    let job = Job::new(protocol, operation);
    job.validate(Role::Receiver).map_err(|e| e.to_string())?;
    let state: Shared = Arc::default();
    let s = state.clone();
    std::thread::spawn(move || {
        // A bug in a role must end this run with an error, not leave the page waiting.
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run_pair(&job, &sender, &receiver, &s)))
            .unwrap_or_else(|_| Err("internal error: a role panicked (a bug; please report it)".into()));
        let mut st = s.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(result) => st.result = Some(result),
            Err(e) => st.error = Some(e),
        }
        st.done = true;
    });
    Ok(state)
}

/// Both roles over loopback TCP, their events recorded in `state`; the result beside
/// the plain computation.
fn run_pair(job: &Job, sender: &[Vec<u8>], receiver: &[Vec<u8>], state: &Shared) -> Result<Value, String> {
    let (a, b) = loopback().map_err(|f| f.error.to_string())?;
    let clock = Instant::now();
    let (s, r) = std::thread::scope(|scope| {
        let s = scope.spawn(|| {
            let mut ch = Decorated::wrap(a, Tap { party: "sender", state: state.clone(), clock });
            run_observed(&mut ch, job, Role::Sender, Input::Items(sender), Some(observer("sender", state, clock)))
        });
        let mut ch = Decorated::wrap(b, Tap { party: "receiver", state: state.clone(), clock });
        let r = run_observed(
            &mut ch,
            job,
            Role::Receiver,
            Input::Items(receiver),
            Some(observer("receiver", state, clock)),
        );
        (s.join(), r)
    });
    let s = s.map_err(|_| "the sender's thread panicked".to_string())?;
    let ((_, s_report), (outcome, r_report)) = match (s, r) {
        (Ok(s), Ok(r)) => (s, r),
        (Err(e), _) | (_, Err(e)) => return Err(e.to_string()),
    };
    let theirs: BTreeSet<&[u8]> = sender.iter().map(Vec::as_slice).collect();
    let plain: Vec<&[u8]> = receiver.iter().map(Vec::as_slice).filter(|i| theirs.contains(i)).collect();
    let show = |items: &[&[u8]]| -> Vec<String> {
        let mut v: Vec<String> = items.iter().take(1000).map(|i| String::from_utf8_lossy(i).into_owned()).collect();
        v.sort();
        v
    };
    let (got, ok) = match &outcome {
        Outcome::Intersection(rows) => {
            let items: Vec<&[u8]> = rows.iter().filter_map(|&i| receiver.get(i).map(Vec::as_slice)).collect();
            let same = items.iter().copied().collect::<BTreeSet<_>>() == plain.iter().copied().collect();
            (json!({ "kind": "intersection", "count": items.len(), "items": show(&items) }), same)
        }
        Outcome::Cardinality(n) => (json!({ "kind": "cardinality", "count": n }), *n as usize == plain.len()),
        Outcome::Union(extra) => {
            let union = receiver.len() + extra.len();
            let want = receiver.len() + sender.len() - plain.len();
            (json!({ "kind": "union", "count": union }), union == want)
        }
        _ => (json!({ "kind": "other" }), false),
    };
    let plain_json = match job.operation {
        Operation::Union => json!({ "count": receiver.len() + sender.len() - plain.len() }),
        _ => json!({ "count": plain.len(), "items": show(&plain) }),
    };
    let protocol = r_report.protocol.clone();
    let leak = Spec::named(&protocol)
        .map(|spec| spec.leakage)
        .map(|l| json!({ "model": l.model, "text": l.text, "doc": format!("/docs/{protocol}.md") }));
    Ok(json!({
        "protocol": protocol,
        "operation": job.operation.name(),
        "receiver_learned": got,
        "plain": plain_json,
        "matches": ok,
        "reports": { "receiver": report_json(&r_report), "sender": report_json(&s_report) },
        "leakage": leak,
    }))
}

fn report_json(r: &Report) -> Value {
    serde_json::from_str(&r.to_json()).unwrap_or(Value::Null)
}

/// Records an event of `party`, `t` milliseconds into the run.
fn push(state: &Shared, clock: Instant, party: &str, mut event: Value) {
    let Ok(mut s) = state.lock() else { return };
    if s.events.len() >= MAX_EVENTS {
        s.dropped += 1;
        return;
    }
    event["t"] = json!((clock.elapsed().as_secs_f64() * 1e4).round() / 10.0);
    event["party"] = json!(party);
    s.events.push(event);
}

/// The observer of one party: phases and stream progress become events.
fn observer(party: &'static str, state: &Shared, clock: Instant) -> PhaseObserver {
    let state = state.clone();
    Arc::new(move |p| {
        let event = match p {
            Progress::Phase(name) => json!({ "kind": "phase", "name": name }),
            Progress::Transfer(t) => json!({
                "kind": "transfer", "what": t.what, "sending": t.sending, "done": t.done, "total": t.total,
                "bytes": t.bytes, "total_bytes": t.total_bytes,
            }),
            Progress::Work(w) => json!({ "kind": "work", "done": w.done, "total": w.total, "unit": w.unit }),
            _ => return,
        };
        push(&state, clock, party, event);
    })
}

/// Records each frame a channel sends: what crosses the wire, and its size.
struct Tap {
    party: &'static str,
    state: Shared,
    clock: Instant,
}

impl Decoration for Tap {
    fn send<C: Channel + ?Sized>(&mut self, inner: &mut C, frame: &[u8]) -> Result<(), NetError> {
        let tag = frame.first().map_or(String::new(), |t| format!("0x{t:02x}"));
        inner.send(frame)?;
        push(&self.state, self.clock, self.party, json!({ "kind": "frame", "bytes": frame.len() + 4, "tag": tag }));
        Ok(())
    }
}
