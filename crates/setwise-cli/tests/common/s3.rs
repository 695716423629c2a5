//! A real S3-compatible server for a test: SeaweedFS (`weed mini`, run by
//! `scripts/s3-server --serve`) on loopback ports of its own, with its own data
//! directory, stopped when dropped. The script installs the binary into a cache
//! directory once (scripts/test does it first); `SETWISE_WEED` names another.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every server here has from its start (the script's).
pub const BUCKET: &str = "exchange";
/// The credentials it accepts.
pub const ACCESS_KEY: &str = "setwise-test";
/// The secret of [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "setwise-test-secret";

/// A running server.
pub struct S3Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The filer's `127.0.0.1:PORT`: the storage's own HTTP API, without S3's checks (a
    /// storage operator's view, with which a test removes objects).
    filer: String,
    _data: tempfile::TempDir,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bases handed out in this process: tests run on threads at once, and a range checked
/// free is free only until its server binds it.
static TAKEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

/// The lowest port the kernel gives outgoing connections (Linux's default if unreadable).
/// Ports picked from below it cannot be taken meanwhile by a client's source port (the
/// server's own gRPC clients, a test's connections): the race that had a server fail with
/// "address already in use" when its base came from the ephemeral range.
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Ten consecutive loopback ports free a moment ago (the server's HTTP and gRPC pairs),
/// below the ephemeral range and apart from every other base of this process.
fn free_ports() -> u16 {
    let high = ephemeral_low().saturating_sub(10).max(10_010);
    for _ in 0..200 {
        let base = rand::random_range(10_000..high);
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        if taken.iter().any(|b| b.abs_diff(base) < 10) {
            continue;
        }
        if (base..base + 10).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            taken.push(base);
            return base;
        }
    }
    panic!("no ten free consecutive loopback ports below {high}");
}

/// Whether a server's log says a port was taken: before its own check, or after it.
fn port_taken(log: &str) -> bool {
    log.contains("address already in use") || (log.contains("is not available on") && log.contains("cannot be used"))
}

impl S3Server {
    /// Starts a server (`scripts/s3-server --serve`) and waits until its bucket answers.
    /// A port taken between the check and the server's bind (another program's) is a
    /// retry on other ports, not a failure.
    pub fn start() -> S3Server {
        for _ in 0..4 {
            match S3Server::try_start() {
                Ok(server) => return server,
                Err(log) if port_taken(&log) => continue,
                Err(log) => panic!("{log}"),
            }
        }
        panic!("weed mini found a port of each of four ranges taken");
    }

    fn try_start() -> Result<S3Server, String> {
        let data = tempfile::tempdir().unwrap();
        let base = free_ports();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/s3-server");
        let log = std::fs::File::create(data.path().join("weed.log")).unwrap();
        let child = Command::new("bash")
            .arg(script)
            .arg("--serve")
            .arg(data.path())
            .arg(base.to_string())
            .env("SETWISE_S3_ACCESS_KEY", ACCESS_KEY)
            .env("SETWISE_S3_SECRET_KEY", SECRET_KEY)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start scripts/s3-server --serve");
        let endpoint = format!("http://127.0.0.1:{}", base + 6);
        let filer = format!("127.0.0.1:{}", base + 4);
        let mut server = S3Server { child, endpoint, filer, _data: data };
        server.wait_ready()?;
        Ok(server)
    }

    /// Waits until the bucket answers; the server's log if it exited first.
    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(self._data.path().join("weed.log")).unwrap_or_default();
                return Err(format!("weed mini exited ({status}) before it was ready:\n{log}"));
            }
            // The bucket exists once a read of a missing object in it is answered.
            if std::net::TcpStream::connect(&addr).is_ok() && self.bucket_ready() {
                return Ok(());
            }
            assert!(start.elapsed() < Duration::from_secs(60), "weed mini not ready in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn bucket_ready(&self) -> bool {
        let probe = setwise::staged::Location::parse_with(&format!("s3://{BUCKET}/.ready"), &self.env());
        probe.is_ok_and(|l| l.get("probe", 16).is_ok())
    }

    /// Removes object `key` of the bucket through the filer, as an interrupted writer
    /// leaves the objects it had not written yet.
    pub fn delete(&self, key: &str) {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(&self.filer).unwrap();
        let request =
            format!("DELETE /buckets/{BUCKET}/{key} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.filer);
        conn.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        let status = answer.split(' ').nth(1).unwrap_or("");
        assert!(status.starts_with('2'), "DELETE {key}: {answer}");
    }

    /// The environment a party's process gets to reach the server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}
