//! `setwise ui`: the page runs both roles, and only the page may drive it. A web page
//! elsewhere (cross-site requests, DNS rebinding) can neither start runs nor read them.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `setwise ui` server on a free loopback port, killed when dropped.
struct Ui {
    child: Child,
    addr: String,
    port: u16,
}

impl Ui {
    fn start(extra: &[&str]) -> Self {
        // The server binds a port of its own choosing and says which: a port picked here
        // and bound later can be taken in between (or met by a client connecting to
        // itself while the server starts), and the server then fails to bind.
        let mut child = Command::new(env!("CARGO_BIN_EXE_setwise"))
            .args(["ui", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = std::io::BufReader::new(child.stderr.take().expect("piped"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut said, &mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("the ui server did not say where it listens: {line:?}"))
            .to_string();
        let port = addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
        // Keep reading what it says, so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut said, &mut std::io::sink()));
        Ui { child, addr, port }
    }

    /// One HTTP/1.1 request with `headers` (a Host naming the server unless given);
    /// (status, body).
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head += &format!("Host: {}\r\n", self.addr);
        }
        for (k, v) in headers {
            head += &format!("{k}: {v}\r\n");
        }
        write!(s, "{head}\r\n{body}").unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap();
        let answer = String::from_utf8_lossy(&answer);
        let status = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
        (status, body)
    }

    /// The token the server embeds in its page.
    fn token(&self) -> String {
        let (status, page) = self.request("GET", "/", &[], "");
        assert_eq!(status, 200, "{page}");
        let at = page.find("name=\"setwise-token\" content=\"").expect("the page carries its token") + 30;
        let token = &page[at..at + 32];
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        token.to_string()
    }

    /// A POST as the page sends it: JSON with the token.
    fn post(&self, token: &str, path: &str, body: &str) -> (u16, String) {
        self.request("POST", path, &[("Content-Type", "application/json"), ("X-Setwise-Token", token)], body)
    }

    /// The run `id` once it has ended.
    fn wait(&self, token: &str, id: &str) -> Value {
        let started = Instant::now();
        loop {
            let (status, body) =
                self.request("GET", &format!("/api/runs/{id}?since=0"), &[("X-Setwise-Token", token)], "");
            assert_eq!(status, 200, "{body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            if v["done"] == true {
                return v;
            }
            assert!(started.elapsed() < Duration::from_secs(120), "the run did not end");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SMALL_RUN: &str = r#"{"protocol":"ecdh","operation":"intersection","receiver":{"text":"id\na\nb\nc\nb","format":"csv"},"sender":{"text":"c\nb\nz","format":"lines"}}"#;
const PARSE: &str = r#"{"text":"a\nb","format":"lines"}"#;

fn run_id(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap();
    v["id"].as_str().unwrap_or_else(|| panic!("a run id is a string: {body}")).to_string()
}

/// The page's server: the page itself with its token, a bad CSV refused with the line,
/// and a run of two real roles whose result matches the plain intersection.
#[test]
fn the_page_runs_both_roles() {
    let ui = Ui::start(&[]);
    let (status, page) = ui.request("GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(page.contains("<title>setwise") && !page.contains("src=\"http") && !page.contains("href=\"http"));
    let token = ui.token();
    let (status, body) = ui.post(&token, "/api/parse", r#"{"text":"id,name\na,1\nb\n","format":"csv"}"#);
    assert_eq!(status, 400);
    assert!(body.contains("bad CSV: line 3 has 1 fields, the header has 2"), "{body}");
    let (status, body) = ui.post(&token, "/api/run", SMALL_RUN);
    assert_eq!(status, 200, "{body}");
    let state = ui.wait(&token, &run_id(&body));
    assert_eq!(state["error"], Value::Null);
    let result = &state["result"];
    assert_eq!(result["receiver_learned"]["items"], json!(["b", "c"]));
    assert_eq!(result["matches"], true);
    let events = state["events"].as_array().unwrap();
    let kinds = |k: &str, party: &str| events.iter().filter(|e| e["kind"] == k && e["party"] == party).count();
    for party in ["receiver", "sender"] {
        assert!(kinds("phase", party) >= 3 && kinds("frame", party) >= 2 && kinds("transfer", party) >= 1, "{party}");
    }
    assert!(result["leakage"]["text"].as_str().unwrap().contains("how many items the other holds"));
    // Another server has another token: a token is per start.
    assert_ne!(Ui::start(&[]).token(), token);
}

/// DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 reaches
/// the server with its own name in Host. Nothing is served to such a request.
#[test]
fn requests_naming_another_host_are_refused() {
    let ui = Ui::start(&[]);
    let token = ui.token();
    let evil = format!("evil.example:{}", ui.port);
    let near = format!("127.0.0.1.evil.example:{}", ui.port);
    for host in [evil.as_str(), near.as_str(), "127.0.0.1", "localhost:1"] {
        for (method, path, body) in [("GET", "/", ""), ("GET", "/api/protocols", ""), ("POST", "/api/parse", PARSE)] {
            let headers = [("Host", host), ("Content-Type", "application/json"), ("X-Setwise-Token", &token)];
            let (status, answer) = ui.request(method, path, &headers, body);
            assert_eq!(status, 421, "{method} {path} with Host {host}: {answer}");
            assert!(answer.contains("answers only to requests for 127.0.0.1:"), "{answer}");
        }
    }
    // The loopback names of the listening port are the page's own.
    for host in [ui.addr.clone(), format!("localhost:{}", ui.port), format!("LocalHost:{}", ui.port)] {
        let (status, answer) = ui.request("GET", "/api/protocols", &[("Host", &host)], "");
        assert_eq!(status, 200, "Host {host}: {answer}");
    }
    // A request without a Host is refused too.
    let mut s = TcpStream::connect(&ui.addr).unwrap();
    write!(s, "GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 421") || answer.starts_with("HTTP/1.1 421"), "{answer}");
}

/// A cross-site form or fetch can send `text/plain` without a preflight: the server
/// takes JSON only, and only with the page's token.
#[test]
fn posts_need_json_and_the_page_token() {
    let ui = Ui::start(&[]);
    let token = ui.token();
    for kind in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""] {
        let headers = [("Content-Type", kind), ("X-Setwise-Token", token.as_str())];
        let (status, answer) = ui.request("POST", "/api/run", &headers, SMALL_RUN);
        assert_eq!(status, 415, "Content-Type {kind:?}: {answer}");
        assert!(answer.contains("application/json"), "{answer}");
    }
    let (status, answer) = ui.request("POST", "/api/run", &[("Content-Type", "application/json")], SMALL_RUN);
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("token"), "{answer}");
    let wrong = "0".repeat(32);
    for bad in [wrong.as_str(), &token[..31], ""] {
        let (status, answer) = ui.post(bad, "/api/run", SMALL_RUN);
        assert_eq!(status, 403, "token {bad:?}: {answer}");
        let (status, _) = ui.post(bad, "/api/parse", PARSE);
        assert_eq!(status, 403, "token {bad:?}");
    }
    let headers = [("Content-Type", "application/json; charset=utf-8"), ("X-Setwise-Token", token.as_str())];
    let (status, answer) = ui.request("POST", "/api/parse", &headers, PARSE);
    assert_eq!(status, 200, "{answer}");
}

/// A request that a browser marks as coming from another origin is refused, token or not.
#[test]
fn cross_origin_requests_are_refused() {
    let ui = Ui::start(&[]);
    let token = ui.token();
    let same = format!("http://{}", ui.addr);
    let other_port = format!("http://127.0.0.1:{}", ui.port.wrapping_add(1).max(1));
    for origin in ["http://evil.example", "null", other_port.as_str(), "https://127.0.0.1"] {
        let headers = [("Content-Type", "application/json"), ("X-Setwise-Token", &token), ("Origin", origin)];
        let (status, answer) = ui.request("POST", "/api/run", &headers, SMALL_RUN);
        assert_eq!(status, 403, "Origin {origin}: {answer}");
        assert!(answer.contains("origin"), "{answer}");
    }
    let headers = [("Content-Type", "application/json"), ("X-Setwise-Token", &token), ("Origin", &same)];
    let (status, answer) = ui.request("POST", "/api/parse", &headers, PARSE);
    assert_eq!(status, 200, "{answer}");
}

/// Run ids are 128 random bits: nothing to count up to. Reading a run needs the token
/// as well.
#[test]
fn runs_have_unguessable_ids_and_need_the_token() {
    let ui = Ui::start(&[]);
    let token = ui.token();
    let (status, first) = ui.post(&token, "/api/run", SMALL_RUN);
    assert_eq!(status, 200, "{first}");
    let first = run_id(&first);
    ui.wait(&token, &first);
    let (status, second) = ui.post(&token, "/api/run", SMALL_RUN);
    assert_eq!(status, 200, "{second}");
    let second = run_id(&second);
    for id in [&first, &second] {
        assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "run id {id}");
    }
    assert_ne!(first, second);
    for guess in ["0", "1", "2", "00000000000000000000000000000001"] {
        let (status, _) = ui.request("GET", &format!("/api/runs/{guess}"), &[("X-Setwise-Token", &token)], "");
        assert_eq!(status, 404, "run {guess}");
    }
    let (status, answer) = ui.request("GET", &format!("/api/runs/{first}?since=0"), &[], "");
    assert_eq!(status, 403, "{answer}");
    let (status, _) = ui.request("GET", &format!("/api/runs/{first}"), &[("X-Setwise-Token", &"1".repeat(32))], "");
    assert_eq!(status, 403);
    assert_eq!(ui.wait(&token, &second)["result"]["matches"], true);
}

/// Runs at once are capped: one more is refused with 429 until one ends.
#[test]
fn runs_at_once_are_capped() {
    let ui = Ui::start(&["--max-runs", "1"]);
    let token = ui.token();
    // Large enough to last seconds on a loaded machine.
    let set = |from: usize| (from..from + (1 << 16)).map(|i| format!("item{i}")).collect::<Vec<_>>().join("\n");
    let big = json!({
        "protocol": "ecdh", "operation": "cardinality",
        "receiver": { "text": set(0), "format": "lines" },
        "sender": { "text": set(1 << 15), "format": "lines" },
    })
    .to_string();
    let (status, body) = ui.post(&token, "/api/run", &big);
    assert_eq!(status, 200, "{body}");
    let running = run_id(&body);
    let (status, answer) = ui.post(&token, "/api/run", SMALL_RUN);
    assert_eq!(status, 429, "{answer}");
    assert!(answer.contains("1 run is already running"), "{answer}");
    let done = ui.wait(&token, &running);
    assert_eq!(done["result"]["receiver_learned"]["count"], 1 << 15);
    let (status, answer) = ui.post(&token, "/api/run", SMALL_RUN);
    assert_eq!(status, 200, "once the run ended another starts: {answer}");
}
