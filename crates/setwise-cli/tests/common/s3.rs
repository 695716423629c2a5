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

/// Ten consecutive loopback ports free a moment ago (the server's HTTP and gRPC pairs).
fn free_ports() -> u16 {
    for _ in 0..50 {
        let base = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !(1024..=65_000).contains(&base) {
            continue;
        }
        if (base..base + 10).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!("no ten free consecutive loopback ports");
}

impl S3Server {
    /// Starts a server (`scripts/s3-server --serve`) and waits until its bucket answers.
    pub fn start() -> S3Server {
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
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        let addr = self.endpoint.trim_start_matches("http://").to_string();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(self._data.path().join("weed.log")).unwrap_or_default();
                panic!("weed mini exited ({status}) before it was ready:\n{log}");
            }
            // The bucket exists once a read of a missing object in it is answered.
            if std::net::TcpStream::connect(&addr).is_ok() && self.bucket_ready() {
                return;
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
