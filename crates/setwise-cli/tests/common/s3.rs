//! A real S3-compatible server for a test: SeaweedFS (`weed mini`) on loopback ports of
//! its own, with its own data directory, stopped when dropped. `scripts/s3-server
//! --install` puts the binary in a cache directory (scripts/test does it first);
//! `SETWISE_WEED` names another.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every server here has from its start.
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
    _data: tempfile::TempDir,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn weed() -> PathBuf {
    if let Some(p) = std::env::var_os("SETWISE_WEED") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("SETWISE_S3_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"))
            .join("setwise-s3")
    });
    let p = cache.join("seaweedfs-4.48/bin/weed");
    assert!(p.exists(), "no S3 server at {}: run scripts/s3-server --install (scripts/test does)", p.display());
    p
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
    /// Starts a server and waits until its S3 port answers.
    pub fn start() -> S3Server {
        let data = tempfile::tempdir().unwrap();
        let config = data.path().join("s3.json");
        let identities = format!(
            r#"{{"identities":[{{"name":"test","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List"]}}]}}"#
        );
        std::fs::write(&config, identities).unwrap();
        let b = free_ports();
        let port = |k: u16| (b + k).to_string();
        let mut cmd = Command::new(weed());
        cmd.arg("mini")
            .arg(format!("-dir={}", data.path().join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .args(["-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!("-s3.config={}", config.display()))
            .arg(format!("-bucket={BUCKET}"));
        let names = [
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "admin.port",
            "admin.port.grpc",
        ];
        for (k, name) in names.iter().enumerate() {
            cmd.arg(format!("-{name}={}", port(k as u16)));
        }
        std::fs::create_dir_all(data.path().join("data")).unwrap();
        let log = std::fs::File::create(data.path().join("weed.log")).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(log).spawn().expect("start weed mini");
        let endpoint = format!("http://127.0.0.1:{}", port(6));
        let mut server = S3Server { child, endpoint, _data: data };
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
            // The bucket is created once the S3 gateway answers; a listing of it says so.
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
