//! Where a staged run's exchange is: a directory (local or mounted on every machine that
//! runs a stage) or a prefix in an S3-compatible bucket (`s3://bucket/prefix`).
//!
//! Both hold objects by name (`stage-1/sender/part-00007.bin`) and offer the same three
//! operations, none of which lists, because object stores list only eventually and a
//! reader must never act on a partial listing: a bounded read, a write-once create, and a
//! replacing write (abort notes; every part and marker is created once). An object appears whole or not at all in both: a
//! directory's are written to a temporary file and linked (created) or renamed
//! (replaced) into place, and an S3 PUT is atomic. Write-once is what lets a retried task
//! or a restarted party write again safely: the second write of a name finds the first's
//! object, and the caller compares what is there with what it would have written.
//!
//! The bucket is reached through `object_store`'s S3 client, configured from the AWS
//! environment variables (not from `~/.aws` profiles: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL` for an S3-compatible server, `AWS_ALLOW_HTTP=true` for
//! one on plain HTTP); write-once is S3's conditional create (`If-None-Match: *`), which
//! AWS S3 and the servers the tests run (SeaweedFS) honour atomically. The server is
//! not trusted with memory: an object's content is read to at most the size allowed, and
//! any other answer (an error document) to at most 64 KiB (`CutBodies`).

use crate::error::{Deviation, Error, Result};
use crate::io::{write_atomic, write_new};
use crate::wire::text::{MAX_SHOWN, printable};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a write-once create found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The object was written.
    Created,
    /// An object of that name was already there and is left as it was.
    Exists,
}

/// Where an exchange's objects are.
#[derive(Clone)]
pub struct Location(Where);

#[derive(Clone)]
enum Where {
    Dir(PathBuf),
    Bucket(Arc<Bucket>),
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Where::Dir(root) => write!(f, "{}", root.display()),
            Where::Bucket(b) => f.write_str(&b.url),
        }
    }
}

impl From<&Path> for Location {
    fn from(root: &Path) -> Self {
        Location::dir(root)
    }
}

impl From<&PathBuf> for Location {
    fn from(root: &PathBuf) -> Self {
        Location::dir(root)
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Self {
        l.clone()
    }
}

impl Location {
    /// The directory `root` (created when first written to).
    pub fn dir(root: &Path) -> Self {
        Location(Where::Dir(root.to_path_buf()))
    }

    /// `s3://bucket[/prefix]` (or Hadoop's `s3a://`) for a prefix in an S3-compatible
    /// bucket, configured from the environment (see the module's doc); anything else is a
    /// directory's path.
    pub fn parse(spec: &str) -> Result<Self> {
        Self::parse_with(spec, &[] as &[(&str, &str)])
    }

    /// [`parse`](Self::parse), with `settings` over the environment's for a bucket: pairs
    /// of an AWS variable's name (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …) and its value.
    pub fn parse_with(spec: &str, settings: &[(impl AsRef<str>, impl AsRef<str>)]) -> Result<Self> {
        match spec.split_once("://") {
            Some(("s3" | "s3a", rest)) => Ok(Location(Where::Bucket(Arc::new(Bucket::open(rest, settings)?)))),
            Some((scheme, _)) if !scheme.contains(['/', '\\']) => Err(Error::usage(
                "exchange",
                format!(
                    "{}: an exchange is a directory or s3://bucket/prefix, not a {}:// address",
                    printable(spec, MAX_SHOWN),
                    printable(scheme, MAX_SHOWN)
                ),
            )),
            // `s3:/bucket` would otherwise be a directory named `s3:` here.
            _ if spec.starts_with("s3:") || spec.starts_with("s3a:") => Err(Error::usage(
                "exchange",
                format!("{}: an S3 exchange is written s3://bucket/prefix", printable(spec, MAX_SHOWN)),
            )),
            _ => Ok(Location::dir(Path::new(spec))),
        }
    }

    /// The directory, for a directory exchange.
    pub fn as_dir(&self) -> Option<&Path> {
        match &self.0 {
            Where::Dir(root) => Some(root),
            Where::Bucket(_) => None,
        }
    }

    /// The last segment of the directory's path or the bucket's prefix (none for a bucket
    /// without a prefix): the run id a run takes by default.
    pub fn last_segment(&self) -> Option<String> {
        match &self.0 {
            Where::Dir(root) => root.file_name().map(|n| n.to_string_lossy().into_owned()),
            Where::Bucket(b) => b.prefix.rsplit('/').next().filter(|s| !s.is_empty()).map(str::to_owned),
        }
    }

    /// Object `name` as errors and messages show it: its path, or its `s3://` address.
    pub fn show(&self, name: &str) -> String {
        match &self.0 {
            Where::Dir(root) => root.join(name).display().to_string(),
            Where::Bucket(b) => format!("{}/{name}", b.url),
        }
    }

    /// Object `name` if there is one, at most `max` bytes (one more is never read): a
    /// directory's must be a regular file, not a link, reached through no link below the
    /// root, because anyone who can write the exchange may have put anything there.
    pub fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        check_name(name)?;
        match &self.0 {
            Where::Dir(root) => {
                let path = root.join(name);
                check_below(root, &path, false)?;
                read_limited(&path, max).map_err(|e| match e {
                    Unreadable::Io(e) => Error::file(&path, e),
                    other => refused(format!("{}: {}", path.display(), why_unreadable(&other))),
                })
            }
            Where::Bucket(b) => b.get(name, max),
        }
    }

    /// Writes object `name` unless one is there ([`Put::Exists`], left untouched).
    pub fn put_new(&self, name: &str, bytes: &[u8]) -> Result<Put> {
        check_name(name)?;
        match &self.0 {
            Where::Dir(root) => {
                let path = root.join(name);
                check_below(root, &path, true)?;
                match write_new(&path, bytes, false) {
                    Ok(true) => Ok(Put::Created),
                    Ok(false) => Ok(Put::Exists),
                    Err(e) => Err(Error::file(&path, e)),
                }
            }
            Where::Bucket(b) => b.put(name, bytes, true),
        }
    }

    /// Writes object `name`, replacing any there (for abort notes, which say the latest
    /// reason a party stopped, and a front end's own small files; every part and marker
    /// of an exchange is created once).
    pub fn put_replace(&self, name: &str, bytes: &[u8]) -> Result<()> {
        check_name(name)?;
        match &self.0 {
            Where::Dir(root) => {
                let path = root.join(name);
                check_below(root, &path, true)?;
                write_atomic(&path, bytes, false).map_err(|e| Error::file(&path, e))
            }
            Where::Bucket(b) => b.put(name, bytes, false).map(|_| ()),
        }
    }
}

/// Refuses a name that could leave the exchange or that a store would read differently:
/// empty, absolute, with an empty, `.` or `..` segment, or with a backslash or a control
/// character.
fn check_name(name: &str) -> Result<()> {
    let bad_segment = |s: &str| s.is_empty() || s == "." || s == "..";
    if name.split('/').any(bad_segment) || name.chars().any(|c| c == '\\' || c.is_control()) {
        return Err(Error::usage("exchange", format!("{name:?} is not an object name of the exchange")));
    }
    Ok(())
}

/// What a bucket's name may be: what S3 and the stores that speak it (Ceph, MinIO,
/// SeaweedFS) accept between them, so that nothing else reaches a request's URL: 3 to 255
/// ASCII letters, digits, `.`, `-` and `_` (S3's legacy names in us-east-1 have capitals
/// and `_`, up to 255; new ones are stricter, which the store enforces), beginning and
/// ending with a letter or digit, no `..`, not shaped as an IP address. Checked before
/// any request, so a mistyped name fails here rather than as a server's puzzling answer.
fn check_bucket_name(name: &str) -> std::result::Result<(), &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !(3..=255).contains(&name.len()) {
        return Err("3 to 255 characters");
    }
    if !name.chars().all(allowed) {
        return Err("letters, digits, '.', '-' and '_' only");
    }
    if !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Err("begins and ends with a letter or digit");
    }
    if name.contains("..") {
        return Err("no two '.' in a row");
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("not an IP address");
    }
    Ok(())
}

/// What someone who can write the exchange put there, refused for `why`.
pub(super) fn refused(why: String) -> Error {
    Deviation::StagedMessage { why }.into()
}

/// Why a file could not be read as a small regular file.
pub(super) enum Unreadable {
    /// The path is a symbolic link (not followed).
    Link,
    /// Not a regular file: a FIFO, a device, a directory, a socket.
    NotRegular,
    /// More than the bytes allowed.
    TooLarge(u64),
    /// Any other I/O failure.
    Io(std::io::Error),
}

/// Opens `path` for reading without following a final symbolic link and without waiting
/// on a FIFO (so neither a link to `/dev/zero` nor a FIFO is ever read), and requires a
/// regular file.
fn open_regular(path: &Path) -> std::result::Result<fs::File, Unreadable> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let f = o.open(path).map_err(|e| {
        // O_NOFOLLOW fails with ELOOP on Linux and EMLINK on some BSDs: ask the path.
        if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            Unreadable::Link
        } else {
            Unreadable::Io(e)
        }
    })?;
    // O_NONBLOCK changes nothing for a regular file, the only kind read on.
    match f.metadata() {
        Ok(m) if m.is_file() => Ok(f),
        Ok(_) => Err(Unreadable::NotRegular),
        Err(e) => Err(Unreadable::Io(e)),
    }
}

/// Reads `path` whole if it exists: a regular file (not a link) of at most `max` bytes,
/// read through a limit of `max + 1` bytes whatever its metadata claims.
pub(super) fn read_limited(path: &Path, max: u64) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
    let f = match open_regular(path) {
        Ok(f) => f,
        Err(Unreadable::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let hint = f.metadata().map_or(0, |m| m.len()).min(max).min(1 << 20);
    let mut buf = Vec::with_capacity(hint as usize);
    f.take(max.saturating_add(1)).read_to_end(&mut buf).map_err(Unreadable::Io)?;
    if buf.len() as u64 > max {
        return Err(Unreadable::TooLarge(max));
    }
    Ok(Some(buf))
}

pub(super) fn why_unreadable(e: &Unreadable) -> String {
    match e {
        Unreadable::Link => "a symbolic link (a staged run reads and writes plain files only)".into(),
        Unreadable::NotRegular => "not a regular file (a FIFO, a device or a directory is never read)".into(),
        Unreadable::TooLarge(max) => format!("more than the {max} bytes it can hold"),
        Unreadable::Io(e) => e.to_string(),
    }
}

/// Refuses a path in the exchange that is, or passes through, a symbolic link below the
/// exchange's root (the root itself is the operator's choice). With `create`, missing
/// directories are created one at a time and each checked, so nothing is written
/// through a link planted in the exchange.
fn check_below(root: &Path, path: &Path, create: bool) -> Result<()> {
    let rel = path.strip_prefix(root).map_err(|_| {
        Error::usage("exchange", format!("{} is not in the exchange {}", path.display(), root.display()))
    })?;
    if create {
        fs::create_dir_all(root).map_err(|e| Error::file(root, e))?;
    }
    let mut at = root.to_path_buf();
    let n = rel.components().count();
    for (i, c) in rel.components().enumerate() {
        at.push(c);
        let last = i + 1 == n;
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refused(format!("{}: {}", at.display(), why_unreadable(&Unreadable::Link))));
            }
            Ok(m) if last || m.is_dir() => {}
            Ok(_) => return Err(refused(format!("{}: not a directory", at.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create || last {
                    return Ok(());
                }
                match fs::create_dir(&at) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        // Created meanwhile: checked like any other.
                        if fs::symlink_metadata(&at).map(|m| !m.is_dir()).unwrap_or(true) {
                            return Err(refused(format!("{}: not a directory", at.display())));
                        }
                    }
                    Err(e) => return Err(Error::file(&at, e)),
                }
            }
            Err(e) => return Err(Error::file(&at, e)),
        }
    }
    Ok(())
}

/// Most bytes read of a response that is not an object's content (an error document, a
/// PUT's answer): S3's error documents are a few hundred bytes.
const MAX_OTHER_BODY: usize = 64 << 10;

/// The exchange's HTTP client: reqwest's, as object_store makes it, with every response
/// but a successful GET (an object's content, which [`Bucket::get`] cuts at the size it
/// allows) read to at most [`MAX_OTHER_BODY`] bytes. object_store reads an error's body
/// whole into a string, so a server that answers an error with an endless body would
/// otherwise fill memory until the request's timeout.
#[derive(Debug)]
struct CutBodies;

impl object_store::client::HttpConnector for CutBodies {
    fn connect(&self, options: &object_store::ClientOptions) -> object_store::Result<object_store::client::HttpClient> {
        let inner =
            object_store::client::HttpConnector::connect(&object_store::client::ReqwestConnector::default(), options)?;
        Ok(object_store::client::HttpClient::new(CutBodiesClient(inner)))
    }
}

#[derive(Debug)]
struct CutBodiesClient(object_store::client::HttpClient);

#[async_trait::async_trait]
impl object_store::client::HttpService for CutBodiesClient {
    async fn call(
        &self,
        req: object_store::client::HttpRequest,
    ) -> std::result::Result<object_store::client::HttpResponse, object_store::client::HttpError> {
        use futures_util::StreamExt;
        let content = req.method().as_str() == "GET";
        let response = self.0.execute(req).await?;
        if content && response.status().is_success() {
            return Ok(response);
        }
        let (parts, body) = response.into_parts();
        let mut kept = Vec::new();
        let mut chunks = body.bytes_stream();
        // A body that fails to arrive ends where it stopped: object_store maps the status
        // (404: absent, 412: created already) only from a body it could read as text.
        while kept.len() < MAX_OTHER_BODY
            && let Some(Ok(chunk)) = chunks.next().await
        {
            kept.extend_from_slice(&chunk[..chunk.len().min(MAX_OTHER_BODY - kept.len())]);
        }
        // Cut on a character's boundary, for the same reason.
        if let Err(e) = std::str::from_utf8(&kept) {
            kept.truncate(e.valid_up_to());
        }
        // Dropping the rest closes the connection rather than reading it.
        Ok(object_store::client::HttpResponse::from_parts(parts, kept.into()))
    }
}

/// A prefix in an S3-compatible bucket, with the runtime its client's calls run on.
struct Bucket {
    store: object_store::aws::AmazonS3,
    /// The prefix, without a leading or trailing `/` (empty: the bucket's root).
    prefix: String,
    /// `s3://bucket[/prefix]`, as shown.
    url: String,
    runtime: tokio::runtime::Runtime,
}

impl Bucket {
    /// `bucket[/prefix]` (after `s3://`), configured from the environment.
    fn open(rest: &str, settings: &[(impl AsRef<str>, impl AsRef<str>)]) -> Result<Bucket> {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let prefix = prefix.trim_matches('/').to_owned();
        let url = if prefix.is_empty() { format!("s3://{bucket}") } else { format!("s3://{bucket}/{prefix}") };
        let shown = printable(&url, MAX_SHOWN);
        if bucket.is_empty() || (!prefix.is_empty() && check_name(&prefix).is_err()) {
            return Err(Error::usage("exchange", format!("{shown}: not s3://bucket or s3://bucket/prefix")));
        }
        check_bucket_name(bucket).map_err(|why| {
            Error::usage("exchange", format!("{shown}: bucket name '{}': {why}", printable(bucket, MAX_SHOWN)))
        })?;
        // reqwest's TLS (for https endpoints) uses the process's rustls provider: ring, as
        // everywhere in setwise. Installing fails only if one is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = object_store::aws::AmazonS3Builder::from_env();
        for (name, value) in settings {
            let key = name.as_ref().to_ascii_lowercase().parse::<object_store::aws::AmazonS3ConfigKey>();
            let key = key.map_err(|_| Error::usage("exchange", format!("{}: not an S3 setting", name.as_ref())))?;
            builder = builder.with_config(key, value.as_ref());
        }
        let store = builder
            .with_bucket_name(bucket)
            .with_http_connector(CutBodies)
            .build()
            .map_err(|e| Error::usage("exchange", format!("{url}: {e}")))?;
        // Two threads drive the client's connections; callers (parts written from many
        // threads) block on their own calls.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("setwise-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::usage("exchange", format!("{url}: no runtime for the S3 client: {e}")))?;
        Ok(Bucket { store, prefix, url, runtime })
    }

    fn path(&self, name: &str) -> object_store::path::Path {
        if self.prefix.is_empty() {
            object_store::path::Path::from(name)
        } else {
            object_store::path::Path::from(format!("{}/{name}", self.prefix))
        }
    }

    /// A failed request, naming the object; the server's text (its error document
    /// included) is shown escaped and bounded, as any text from outside is.
    fn failed(&self, name: &str, e: impl std::fmt::Display) -> Error {
        let why = printable(&e.to_string(), 4 * MAX_SHOWN);
        Error::file(Path::new(&format!("{}/{name}", self.url)), std::io::Error::other(why))
    }

    /// Runs `call` to its end on the bucket's runtime. From a thread inside another
    /// runtime (an async caller, or its `spawn_blocking` threads), where blocking on a
    /// runtime would panic, it blocks on a thread of its own instead.
    fn block_on<T: Send>(&self, call: impl std::future::Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(call);
        }
        std::thread::scope(|s| s.spawn(|| self.runtime.block_on(call)).join()).unwrap_or_else(|panic| {
            // The call's own panic, passed on as it would be without the thread.
            std::panic::resume_unwind(panic)
        })
    }

    fn get(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        use futures_util::StreamExt;
        use object_store::ObjectStoreExt;
        let path = self.path(name);
        self.block_on(async {
            let got = match self.store.get(&path).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.failed(name, e)),
            };
            let too_large = || refused(format!("{}/{name}: more than the {max} bytes it can hold", self.url));
            if got.meta.size > max {
                return Err(too_large());
            }
            // What the server says the size is bounds the first allocation; the stream
            // is still cut at `max`, whatever it sends.
            let mut buf = Vec::with_capacity(got.meta.size.min(1 << 20) as usize);
            let mut chunks = got.into_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| self.failed(name, e))?;
                if (buf.len() + chunk.len()) as u64 > max {
                    return Err(too_large());
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(Some(buf))
        })
    }

    fn put(&self, name: &str, bytes: &[u8], once: bool) -> Result<Put> {
        use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
        let path = self.path(name);
        let mode = if once { PutMode::Create } else { PutMode::Overwrite };
        let payload = PutPayload::from(bytes.to_vec());
        self.block_on(async {
            match self.store.put_opts(&path, payload, PutOptions::from(mode)).await {
                Ok(_) => Ok(Put::Created),
                Err(object_store::Error::AlreadyExists { .. }) if once => Ok(Put::Exists),
                Err(e) => Err(self.failed(name, e)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_exchange_are_refused() {
        for bad in ["", "/abs", "a//b", "a/../b", "..", "./a", "a/", "a\\b", "a\nb"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["stage-1/sender/part-00007.bin", "abort-sender.json", "rounds/stage-2/bucket-3.tasks.json"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn addresses_are_directories_or_s3_prefixes() {
        let d = Location::parse("/tmp/ex/run-7").unwrap();
        assert_eq!(d.as_dir(), Some(Path::new("/tmp/ex/run-7")));
        assert_eq!(d.last_segment().as_deref(), Some("run-7"));
        assert_eq!(d.show("abort-sender.json"), "/tmp/ex/run-7/abort-sender.json");
        let b = Location::parse("s3://bucket/runs/run-7/").unwrap();
        assert!(b.as_dir().is_none());
        assert_eq!(b.to_string(), "s3://bucket/runs/run-7");
        assert_eq!(b.last_segment().as_deref(), Some("run-7"));
        assert_eq!(b.show("stage-1/sender.done.json"), "s3://bucket/runs/run-7/stage-1/sender.done.json");
        assert_eq!(Location::parse("s3a://bucket").unwrap().last_segment(), None);
        for bad in ["s3://", "s3:///x", "s3://bucket/a/../c", "http://host/x", "s3:/bucket/x", "s3a:bucket"] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
        let one_slash = Location::parse("s3:/bucket/x").unwrap_err().to_string();
        assert!(one_slash.contains("written s3://bucket/prefix"), "{one_slash}");
        for (bad, why) in [
            ("s3://ab/x", "3 to 255 characters"),
            ("s3://my bucket/x", "letters, digits"),
            ("s3://b%2Fc/x", "letters, digits"),
            ("s3://-bucket", "begins and ends"),
            ("s3://a..b", "two '.'"),
            ("s3://192.168.0.1/x", "IP address"),
            ("s3://b\u{1b}[2Jx/y", "letters, digits"),
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains("bucket name") && e.contains(why) && !e.contains('\u{1b}'), "{bad}: {e}");
        }
        for good in ["s3://abc", "s3://my-bucket.2026/runs", "s3a://exchange/x", "s3://Legacy_Bucket/x"] {
            Location::parse(good).unwrap();
        }
    }

    /// A hostile "S3 server" on loopback: it answers every request with `head`, then
    /// (with `endless`) with a body that never ends, of escape sequences, until the
    /// client hangs up (or 256 MiB a connection). Returns its endpoint and the bytes of
    /// body it sent.
    fn hostile_server(head: &'static str, endless: bool) -> (String, Arc<std::sync::atomic::AtomicU64>) {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut request = [0u8; 64 << 10];
                    let _ = conn.read(&mut request);
                    if conn.write_all(head.as_bytes()).is_err() || !endless {
                        return;
                    }
                    let chunk = b"\x1b[2J<Error>".repeat(4096);
                    let mut mine = 0u64;
                    while mine < 256 << 20 && conn.write_all(&chunk).is_ok() {
                        mine += chunk.len() as u64;
                        counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                });
            }
        });
        (endpoint, sent)
    }

    fn at(endpoint: &str) -> Location {
        let settings = [
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "us-east-1"),
        ];
        Location::parse_with("s3://bucket/run", &settings).unwrap()
    }

    #[test]
    fn a_servers_endless_error_body_is_cut_short_and_shown_escaped() {
        let (endpoint, sent) = hostile_server("HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n\r\n", true);
        let l = at(&endpoint);
        let get = l.get("stage-1/sender.done.json", 100).unwrap_err().to_string();
        let put = l.put_new("stage-1/receiver.done.json", b"{}").unwrap_err().to_string();
        for e in [&get, &put] {
            assert!(e.contains("s3://bucket/run/stage-1/") && e.contains("403"), "{e}");
            assert!(!e.contains('\u{1b}') && e.len() < 2000, "{e}");
        }
        // Without the cut, the client reads each answer whole (here 256 MiB; an endless
        // one until the request's timeout).
        let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        assert!(sent < 64 << 20, "the client read {sent} bytes of error bodies");
    }

    #[test]
    fn a_call_from_inside_an_async_runtime_or_its_blocking_threads_works() {
        let (endpoint, _) = hostile_server("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false);
        let l = at(&endpoint);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        assert_eq!(rt.block_on(async { l.get("stage-1/sender.done.json", 10) }).unwrap(), None);
        let from_blocking = l.clone();
        let got = rt.block_on(async move {
            tokio::task::spawn_blocking(move || from_blocking.get("stage-1/sender.done.json", 10)).await.unwrap()
        });
        assert_eq!(got.unwrap(), None);
        assert_eq!(l.get("stage-1/sender.done.json", 10).unwrap(), None);
    }

    /// An error whose body is longer than what is read of it, cut inside a character,
    /// still gives its status: a 404 is an absent object, a 412 a name created already.
    #[test]
    fn a_long_error_body_cut_inside_a_character_keeps_its_status() {
        let long = |status: &str| {
            // 2 bytes each after one: 64 KiB ends inside a character.
            let body = format!("x{}", "é".repeat(MAX_OTHER_BODY));
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            &*Box::leak(head.into_boxed_str())
        };
        let (endpoint, _) = hostile_server(long("404 Not Found"), false);
        assert_eq!(at(&endpoint).get("stage-1/sender.done.json", 10).unwrap(), None);
        let (endpoint, _) = hostile_server(long("412 Precondition Failed"), false);
        assert_eq!(at(&endpoint).put_new("stage-1/sender.done.json", b"{}").unwrap(), Put::Exists);
    }

    #[test]
    fn an_object_larger_than_allowed_is_refused_before_its_body_is_read() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\nETag: \"e\"\r\n\
                    Last-Modified: Sun, 29 Nov 2026 04:00:00 GMT\r\n\r\n";
        let (endpoint, sent) = hostile_server(head, true);
        let e = at(&endpoint).get("stage-1/sender/part-00000.bin", 100).unwrap_err().to_string();
        assert!(e.contains("more than the 100 bytes"), "{e}");
        assert!(sent.load(std::sync::atomic::Ordering::Relaxed) < 64 << 20);
    }

    #[test]
    fn a_directory_object_is_created_once_and_replaced_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let l = Location::dir(&dir.path().join("ex"));
        assert_eq!(l.get("stage-1/r/p.bin", 10).unwrap(), None);
        assert_eq!(l.put_new("stage-1/r/p.bin", b"first").unwrap(), Put::Created);
        assert_eq!(l.put_new("stage-1/r/p.bin", b"second").unwrap(), Put::Exists);
        assert_eq!(l.get("stage-1/r/p.bin", 10).unwrap().unwrap(), b"first");
        assert!(l.get("stage-1/r/p.bin", 4).unwrap_err().to_string().contains("more than the 4 bytes"));
        l.put_replace("stage-1/r/p.bin", b"third").unwrap();
        assert_eq!(l.get("stage-1/r/p.bin", 10).unwrap().unwrap(), b"third");
        let left: Vec<_> = fs::read_dir(dir.path().join("ex/stage-1/r")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary left behind");
    }
}
