//! TCP transport. Either role may listen or connect; connecting retries until a timeout
//! so the two processes can be started in any order.

use super::frame::{map_io, read_frame, write_frame};
use super::{Channel, DEFAULT_MAX_FRAME, NetError, Stats};
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Settings of a TCP channel.
#[derive(Debug, Clone, Copy)]
pub struct TcpConfig {
    /// Largest frame accepted or sent.
    pub max_frame: usize,
    /// Read and write timeout; `None` waits forever.
    pub io_timeout: Option<Duration>,
    /// How long `connect` keeps retrying.
    pub connect_timeout: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            // Long enough for the peer's compute phases on 2^20-item sets.
            io_timeout: Some(Duration::from_secs(600)),
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// A framed TCP connection to the peer.
#[derive(Debug)]
pub struct TcpChannel {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    peer: SocketAddr,
    config: TcpConfig,
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

    /// Wraps an established stream.
    pub fn from_stream(stream: TcpStream, config: TcpConfig) -> Result<Self, NetError> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(config.io_timeout)?;
        stream.set_write_timeout(config.io_timeout)?;
        let peer = stream.peer_addr()?;
        let reader = BufReader::with_capacity(1 << 16, stream.try_clone()?);
        let writer = BufWriter::with_capacity(1 << 16, stream);
        Ok(Self { reader, writer, peer, config, stats: Stats::default() })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn timeout(&self, e: NetError) -> NetError {
        match e {
            NetError::Timeout(_) => NetError::Timeout(self.config.io_timeout.unwrap_or_default()),
            e => e,
        }
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, frame: &[u8]) -> Result<(), NetError> {
        write_frame(&mut self.writer, frame, self.config.max_frame).map_err(|e| self.timeout(e))?;
        self.writer.flush().map_err(|e| self.timeout(map_io(e)))?;
        self.stats.count_sent(frame.len());
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>, NetError> {
        let frame = read_frame(&mut self.reader, self.config.max_frame).map_err(|e| self.timeout(e))?;
        self.stats.count_received(frame.len());
        Ok(frame)
    }

    fn stats(&self) -> Stats {
        self.stats
    }
}
