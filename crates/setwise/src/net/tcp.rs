//! TCP transport. Either role may listen or connect; connecting retries until a timeout
//! so the two processes can be started in any order.
//!
//! Deadlines are per frame and per session, not per read: a whole frame must arrive (or
//! leave) within `io_timeout`, however slowly the peer trickles its bytes, and the whole
//! session must end within `session_timeout`. Each read or write on the socket is given
//! only the time left until the nearer of the two.

use super::frame::{map_io, read_frame, write_frame};
use super::{Channel, DEFAULT_MAX_FRAME, NetError, Stats};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Settings of a TCP channel.
#[derive(Debug, Clone, Copy)]
pub struct TcpConfig {
    /// Largest frame accepted or sent.
    pub max_frame: usize,
    /// Time a whole frame may take to arrive or leave; `None` waits forever.
    pub io_timeout: Option<Duration>,
    /// Time the whole session may take from the connection on; `None`: no limit.
    pub session_timeout: Option<Duration>,
    /// How long `connect` keeps retrying.
    pub connect_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            // Long enough for the peer's compute phases on 2^20-item sets.
            io_timeout: Some(Duration::from_secs(600)),
            session_timeout: None,
            connect_timeout: Duration::from_secs(30),
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
    reader: BufReader<Deadlined>,
    writer: BufWriter<Deadlined>,
    peer: SocketAddr,
    config: TcpConfig,
    /// When the session must end.
    session_deadline: Option<Instant>,
    stats: Stats,
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
                Ok(stream) => return Self::from_stream(stream, config),
                Err(e) if start.elapsed() >= config.connect_timeout => {
                    return Err(NetError::Connect { addr: addr.to_string(), waited: start.elapsed(), source: e });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Accepts one connection on `listener`.
    pub fn accept(listener: &TcpListener, config: TcpConfig) -> Result<Self, NetError> {
        let (stream, _) = listener.accept()?;
        Self::from_stream(stream, config)
    }

    /// Binds `addr` and accepts one connection.
    pub fn listen(addr: &str, config: TcpConfig) -> Result<Self, NetError> {
        let listener = TcpListener::bind(addr)?;
        Self::accept(&listener, config)
    }

    /// Wraps an established stream; the session deadline starts now.
    pub fn from_stream(stream: TcpStream, config: TcpConfig) -> Result<Self, NetError> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?;
        let reader = BufReader::with_capacity(1 << 16, Deadlined { stream: stream.try_clone()?, deadline: None });
        let writer = BufWriter::with_capacity(1 << 16, Deadlined { stream, deadline: None });
        let session_deadline = config.session_timeout.map(|t| Instant::now() + t);
        Ok(Self { reader, writer, peer, config, session_deadline, stats: Stats::default() })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The deadline of a frame starting now: the frame timeout, or the session's end if
    /// nearer. Also says which of the two it is.
    fn frame_deadline(&self) -> (Option<Instant>, bool) {
        let frame = self.config.io_timeout.map(|t| Instant::now() + t);
        match (frame, self.session_deadline) {
            (Some(f), Some(s)) if s < f => (Some(s), true),
            (None, Some(s)) => (Some(s), true),
            (f, _) => (f, false),
        }
    }

    /// Names a timeout by the deadline that passed.
    fn timeout(&self, e: NetError, session: bool) -> NetError {
        match e {
            NetError::Timeout(_) if session => {
                NetError::SessionDeadline(self.config.session_timeout.unwrap_or_default())
            }
            NetError::Timeout(_) => NetError::Timeout(self.config.io_timeout.unwrap_or_default()),
            e => e,
        }
    }

    fn recv_at_most(&mut self, max: usize) -> Result<Vec<u8>, NetError> {
        let (deadline, session) = self.frame_deadline();
        self.reader.get_mut().deadline = deadline;
        let frame = read_frame(&mut self.reader, max).map_err(|e| self.timeout(e, session))?;
        self.stats.count_received(frame.len());
        Ok(frame)
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        let (deadline, session) = self.frame_deadline();
        self.writer.get_mut().deadline = deadline;
        write_frame(&mut self.writer, frame, self.config.max_frame).map_err(|e| self.timeout(e, session))?;
        self.writer.flush().map_err(|e| self.timeout(map_io(e), session))?;
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
}
