//! TCP transport. Either role may listen or connect; connecting retries until a timeout
//! so the two processes can be started in any order.
//!
//! Deadlines are per frame and per session, not per read: a whole frame must arrive (or
//! leave) within `io_timeout`, however slowly the peer trickles its bytes, and the whole
//! session must end within `session_timeout`. Each read or write on the socket is given
//! only the time left until the nearer of the two.
//!
//! With a [`TlsConfig`] the frames travel inside TLS 1.3 (the listener is the TLS
//! server); without one, in the clear, and a TLS peer is recognised by its first bytes.
//!
//! A listener admits a connection ([`TcpChannel::admit`]) only once its TLS handshake
//! and its first frame (the hello) have arrived within a short deadline of their own;
//! the frame is kept for the first `recv`.

use super::TlsError;
use super::frame::{map_io, read_frame, write_frame};
use super::server::Admission;
use super::tls::{Established, TlsConfig, TlsLink, looks_like_tls, map_tls_io};
use super::{Channel, DEFAULT_MAX_FRAME, NetError, Stats};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of a TCP channel.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Largest frame accepted or sent.
    pub max_frame: usize,
    /// Time a whole frame may take to arrive or leave; `None` waits forever.
    pub io_timeout: Option<Duration>,
    /// Time the whole session may take from the connection on; `None`: no limit.
    pub session_timeout: Option<Duration>,
    /// How long `connect` keeps retrying.
    pub connect_timeout: Duration,
    /// TLS 1.3 around the frames; `None`: plain TCP.
    pub tls: Option<Arc<TlsConfig>>,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            // Long enough for the peer's compute phases on 2^20-item sets.
            io_timeout: Some(Duration::from_secs(600)),
            session_timeout: None,
            connect_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// The socket with the deadline of the frame in progress: each read or write may wait
/// only until then.
#[derive(Debug)]
struct Deadlined {
    stream: TcpStream,
    deadline: Option<Instant>,
}

impl Deadlined {
    fn time_left(&self) -> io::Result<Option<Duration>> {
        match self.deadline {
            None => Ok(None),
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Ok(Some(left)),
                _ => Err(io::ErrorKind::TimedOut.into()),
            },
        }
    }
}

impl Read for Deadlined {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(self.time_left()?)?;
        self.stream.read(buf)
    }
}

impl Write for Deadlined {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(self.time_left()?)?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// A framed TCP connection to the peer.
#[derive(Debug)]
pub struct TcpChannel {
    link: Link,
    peer: SocketAddr,
    config: TcpConfig,
    deadlines: Deadlines,
    stats: Stats,
    /// What TLS established, on a TLS channel.
    tls: Option<Established>,
    /// The first frame, read to admit the connection and not yet taken by `recv`.
    first: Option<Vec<u8>>,
}

/// The frame, session and admission deadlines of one connection.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    io_timeout: Option<Duration>,
    session_timeout: Option<Duration>,
    /// When the session must end.
    session_end: Option<Instant>,
    /// Until the connection is admitted: its TLS handshake and first frame must be done
    /// by then (and how long that was).
    admission: Option<(Instant, Duration)>,
}

/// Which deadline a frame has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Frame,
    Session,
    Admission,
}

impl Deadlines {
    /// The deadlines of a connection starting now.
    fn start(config: &TcpConfig) -> Self {
        let session_end = config.session_timeout.map(|t| Instant::now() + t);
        Self { io_timeout: config.io_timeout, session_timeout: config.session_timeout, session_end, admission: None }
    }

    /// The deadline of a frame starting now: the nearest of the frame timeout, the
    /// session's end and the admission's. Also says which it is.
    fn frame(&self) -> (Option<Instant>, Limit) {
        let frame = self.io_timeout.map(|t| Instant::now() + t);
        [(self.session_end, Limit::Session), (self.admission.map(|(end, _)| end), Limit::Admission)].into_iter().fold(
            (frame, Limit::Frame),
            |(d, which), (other, limit)| match (d, other) {
                (Some(d), Some(o)) if o < d => (Some(o), limit),
                (None, Some(o)) => (Some(o), limit),
                _ => (d, which),
            },
        )
    }

    /// Names a timeout by the deadline that passed.
    fn name(&self, e: NetError, which: Limit) -> NetError {
        match (e, which) {
            (NetError::Timeout(_), Limit::Session) => {
                NetError::SessionDeadline(self.session_timeout.unwrap_or_default())
            }
            (NetError::Timeout(_), Limit::Admission) => {
                NetError::HelloDeadline(self.admission.map(|(_, t)| t).unwrap_or_default())
            }
            (NetError::Timeout(_), Limit::Frame) => NetError::Timeout(self.io_timeout.unwrap_or_default()),
            (e, _) => e,
        }
    }
}

/// The byte stream under the frames.
enum Link {
    Plain {
        reader: BufReader<Deadlined>,
        writer: BufWriter<Deadlined>,
    },
    /// The frame being sent is assembled in `out`, so that prefix and payload leave in
    /// the same TLS records.
    Tls {
        link: Box<TlsLink<Deadlined>>,
        out: Vec<u8>,
    },
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::Plain { .. } => "Plain",
            Link::Tls { .. } => "Tls",
        })
    }
}

impl Link {
    fn set_deadline(&mut self, deadline: Option<Instant>) {
        match self {
            Link::Plain { reader, writer } => {
                reader.get_mut().deadline = deadline;
                writer.get_mut().deadline = deadline;
            }
            Link::Tls { link, .. } => link.sock.deadline = deadline,
        }
    }
}

impl TcpChannel {
    /// Connects to `addr`, retrying until `config.connect_timeout` has passed.
    pub fn connect(addr: &str, config: TcpConfig) -> Result<Self, NetError> {
        let start = Instant::now();
        loop {
            let attempt = addr.to_socket_addrs().and_then(|mut addrs| {
                addrs
                    .next()
                    .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address"))
                    .and_then(|a| TcpStream::connect_timeout(&a, config.connect_timeout))
            });
            match attempt {
                Ok(stream) => return Self::over(stream, config, Some(addr), None),
                Err(e) if start.elapsed() >= config.connect_timeout => {
                    return Err(NetError::Connect { addr: addr.to_string(), waited: start.elapsed(), source: e });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Accepts one connection on `listener` (and, with TLS, runs the server handshake).
    pub fn accept(listener: &TcpListener, config: TcpConfig) -> Result<Self, NetError> {
        let (stream, _) = listener.accept()?;
        Self::from_stream(stream, config)
    }

    /// Binds `addr` and accepts one connection.
    pub fn listen(addr: &str, config: TcpConfig) -> Result<Self, NetError> {
        let listener = TcpListener::bind(addr)?;
        Self::accept(&listener, config)
    }

    /// Wraps an accepted stream (with TLS: as the server); the session deadline starts
    /// now and covers the TLS handshake.
    pub fn from_stream(stream: TcpStream, config: TcpConfig) -> Result<Self, NetError> {
        Self::over(stream, config, None, None)
    }

    /// Admits an accepted stream as `admission` says: its TLS handshake and its first
    /// frame (at most `admission.max_first_frame` bytes, passing `admission.check`) must
    /// arrive within `admission.timeout`, whatever the frame timeout. The frame is kept
    /// for the first [`recv`](Channel::recv); from then on the usual deadlines apply.
    pub fn admit(stream: TcpStream, config: TcpConfig, admission: &Admission) -> Result<Self, NetError> {
        let mut ch = Self::over(stream, config, None, Some(admission.timeout))?;
        let frame = match ch.recv_at_most(admission.max_first_frame) {
            Err(e @ NetError::Tls(TlsError::PeerUsesTls)) => {
                // Say so in plain bytes, which the peer's handshake recognises as a
                // setwise peer without TLS, so both sides name the mismatch.
                if let Link::Plain { writer, .. } = &mut ch.link {
                    let reason = b"this peer does not speak TLS: connect to it without TLS, or ask its operator to configure TLS";
                    let _ = writer.write_all(&plain_abort(reason)).and_then(|()| writer.flush());
                }
                return Err(e);
            }
            r => r?,
        };
        if let Some(check) = &admission.check {
            check(&frame).map_err(NetError::NotAdmitted)?;
        }
        ch.first = Some(frame);
        ch.deadlines.admission = None;
        Ok(ch)
    }

    /// `connected_to`: the address we connected to (we are the TLS client), or `None`
    /// for an accepted stream (the TLS server); `admission`: the time the TLS handshake
    /// and the first frame may take, for a listener admitting the connection.
    fn over(
        stream: TcpStream,
        config: TcpConfig,
        connected_to: Option<&str>,
        admission: Option<Duration>,
    ) -> Result<Self, NetError> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        let mut deadlines = Deadlines::start(&config);
        deadlines.admission = admission.map(|t| (Instant::now() + t, t));
        let (link, tls) = match &config.tls {
            None => {
                let reader =
                    BufReader::with_capacity(1 << 16, Deadlined { stream: stream.try_clone()?, deadline: None });
                let writer = BufWriter::with_capacity(1 << 16, Deadlined { stream, deadline: None });
                (Link::Plain { reader, writer }, None)
            }
            Some(tls) => {
                let (deadline, limit) = deadlines.frame();
                let sock = Deadlined { stream, deadline };
                let conn = match connected_to {
                    Some(addr) => tls.client_connection(addr)?,
                    None => {
                        refuse_plain_peer(&sock)?;
                        tls.server_connection()?
                    }
                };
                let mut link = Box::new(TlsLink { conn, sock });
                let established = link.handshake(tls).map_err(|e| deadlines.name(e, limit))?;
                (Link::Tls { link, out: Vec::new() }, Some(established))
            }
        };
        Ok(Self { link, peer, config, deadlines, stats: Stats::default(), tls, first: None })
    }

    /// The identity in the peer's TLS certificate ([`super::certificate_identity`]), on
    /// a TLS channel where the peer presented one that names one.
    pub fn peer_identity(&self) -> Option<&str> {
        self.tls.as_ref().and_then(|t| t.identity.as_deref())
    }

    /// A second handle on the socket: shutting it down (`shutdown(Both)`) from another
    /// thread makes this channel's blocked send or receive fail at once, so a caller can
    /// cancel a run (a Python user pressing Ctrl-C).
    pub fn shutdown_handle(&self) -> std::io::Result<TcpStream> {
        match &self.link {
            Link::Plain { writer, .. } => writer.get_ref().stream.try_clone(),
            Link::Tls { link, .. } => link.sock.stream.try_clone(),
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn recv_at_most(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        if let Some(frame) = self.first.take() {
            if frame.len() > max {
                return Err(NetError::FrameTooLarge { len: frame.len(), max });
            }
            return Ok(frame);
        }
        let (deadline, limit) = self.deadlines.frame();
        self.link.set_deadline(deadline);
        let first = self.stats.messages_received == 0;
        let frame = match &mut self.link {
            Link::Plain { reader, .. } => {
                // A TLS peer's first bytes are a handshake record, never a setwise frame
                // (the first frame is a hello of at most 16 KiB).
                if first && reader.fill_buf().is_ok_and(looks_like_tls) {
                    return Err(TlsError::PeerUsesTls.into());
                }
                read_frame(reader, max)
            }
            Link::Tls { link, .. } => read_frame(link.as_mut(), max).map_err(tls_io_error),
        }
        .map_err(|e| self.deadlines.name(e, limit))?;
        self.stats.count_received(frame.len());
        Ok(frame)
    }
}

/// A TLS listener's check of an accepted connection before its handshake: a peer
/// whose first bytes are not a TLS handshake record is told in a plain abort frame (the
/// wire's tag 0xff and a u32-prefixed reason) and refused.
fn refuse_plain_peer(sock: &Deadlined) -> Result<(), NetError> {
    let mut first = [0u8; 3];
    sock.stream.set_read_timeout(sock.time_left()?)?;
    let n = sock.stream.peek(&mut first).map_err(map_io)?;
    if n == 0 || looks_like_tls(&first[..n]) || (n < 3 && first[0] == 0x16) {
        return Ok(());
    }
    let reason = b"this peer requires TLS: configure TLS on your side (the CA that signed this peer)";
    let _ = (&sock.stream).write_all(&plain_abort(reason));
    Err(TlsError::PeerWithoutTls.into())
}

/// A plain abort frame (the wire's tag 0xff and a u32-prefixed reason), for a peer
/// that speaks the other kind of connection.
fn plain_abort(reason: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(9 + reason.len());
    frame.extend_from_slice(&(5 + reason.len() as u32).to_le_bytes());
    frame.push(0xff);
    frame.extend_from_slice(&(reason.len() as u32).to_le_bytes());
    frame.extend_from_slice(reason);
    frame
}

/// Frame errors on a TLS link: I/O errors carrying a rustls error become TLS errors.
fn tls_io_error(e: NetError) -> NetError {
    match e {
        NetError::Io(io) => map_tls_io(io),
        e => e,
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        let (deadline, limit) = self.deadlines.frame();
        self.link.set_deadline(deadline);
        let max = self.config.max_frame;
        let sent = match &mut self.link {
            Link::Plain { writer, .. } => write_frame(writer, frame, max).and_then(|()| writer.flush().map_err(map_io)),
            Link::Tls { link, out } => {
                out.clear();
                write_frame(out, frame, max)
                    .and_then(|()| link.write_all(out).and_then(|()| link.flush()).map_err(map_tls_io))
            }
        };
        sent.map_err(|e| self.deadlines.name(e, limit))?;
        self.stats.count_sent(frame.len());
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        self.recv_at_most(self.config.max_frame)
    }

    fn recv_limited(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        self.recv_at_most(max.min(self.config.max_frame))
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn peer_identity(&self) -> Option<String> {
        TcpChannel::peer_identity(self).map(str::to_string)
    }

    fn peer_certified(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.certified)
    }

    fn session_binding(&self) -> Option<[u8; 32]> {
        self.tls.as_ref().map(|t| t.binding)
    }
}
