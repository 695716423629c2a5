//! TLS 1.3 (rustls, ring provider) under the framed channel: server and client
//! configuration from PEM files, mutual TLS when a CA for the peer is given, the peer's
//! certificate identity, and an exporter value that binds a setwise session to the TLS
//! session (mixed into the session id: a relay cannot splice two sessions).
//!
//! The side that listens is the TLS server, the side that connects the TLS client,
//! whatever their setwise roles. A plain-TCP peer meeting a TLS peer is recognised on
//! both sides from the first bytes and named as such, instead of ending in a hang or a
//! "malformed frame".

use crate::error::{NetError, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

/// Label of the TLS exporter value that binds a setwise session to its TLS session
/// (RFC 8446 §7.5).
const EXPORTER_LABEL: &[u8] = b"EXPORTER-setwise-session-binding";

impl TlsError {
    /// An operator's reading of a rustls error.
    pub(crate) fn from_rustls(e: &rustls::Error) -> Self {
        use rustls::CertificateError as C;
        use rustls::Error as E;
        let text = match e {
            E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
                "the peer's certificate is not signed by the CA this side trusts".to_string()
            }
            E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
                "the peer's certificate has expired".to_string()
            }
            E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
                "the peer's certificate is not valid yet".to_string()
            }
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                format!("the peer's certificate is not issued for the name this side connected to ({e})")
            }
            E::NoCertificatesPresented => {
                "the peer presented no certificate, and this side requires one (mutual TLS)".to_string()
            }
            E::AlertReceived(alert) => format!(
                "the peer ended the TLS handshake ({alert:?} alert): it does not accept this side's certificate, or requires one"
            ),
            E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => {
                format!("the peer does not speak TLS 1.3 as expected ({e})")
            }
            other => other.to_string(),
        };
        Self::Handshake(text)
    }
}

/// What a party brings to TLS: its certificate chain and key (a server always; a client
/// when the server asks for one), and the CA that must have signed the peer (a client
/// always; on a server it makes client certificates mandatory).
#[derive(Clone)]
pub struct TlsConfig {
    server: Option<Arc<ServerConfig>>,
    client: Option<Arc<ClientConfig>>,
    /// The name the server's certificate must carry when connecting (default: the host
    /// part of the address).
    pub server_name: Option<String>,
    /// Refuse a peer whose certificate is not valid for this name.
    pub peer_name: Option<String>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("can_serve", &self.server.is_some())
            .field("can_connect", &self.client.is_some())
            .field("mutual", &self.server.as_ref().is_some_and(|_| self.client.is_some()))
            .field("server_name", &self.server_name)
            .field("peer_name", &self.peer_name)
            .finish()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn setup(what: &str, path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Setup(format!("{what} {}: {e}", path.display()))
}

/// The certificates of a PEM file (at least one).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| setup("certificate file", path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| setup("certificate file", path, e))?;
    if certs.is_empty() {
        return Err(setup("certificate file", path, "no CERTIFICATE block"));
    }
    Ok(certs)
}

impl TlsConfig {
    /// Reads PEM files: `cert` and `key` (this party's chain and private key; both or
    /// neither), `ca` (the CA that signed the peer). A party that only listens needs
    /// `cert` and `key`; one that only connects needs `ca`.
    pub fn from_pem_files(cert: Option<&Path>, key: Option<&Path>, ca: Option<&Path>) -> Result<Self, TlsError> {
        let identity = match (cert, key) {
            (Some(c), Some(k)) => {
                let chain = read_certificates(c)?;
                let key = PrivateKeyDer::from_pem_file(k).map_err(|e| setup("private key file", k, e))?;
                Some((chain, key))
            }
            (None, None) => None,
            _ => return Err(TlsError::Setup("a certificate needs its private key and the other way round".into())),
        };
        let roots = match ca {
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for c in read_certificates(path)? {
                    roots.add(c).map_err(|e| setup("CA file", path, e))?;
                }
                Some(Arc::new(roots))
            }
            None => None,
        };
        Self::new(identity, roots)
    }

    fn new(
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
        roots: Option<Arc<RootCertStore>>,
    ) -> Result<Self, TlsError> {
        let bad = |e: rustls::Error| TlsError::Setup(e.to_string());
        let tls13 = &[&rustls::version::TLS13];
        let server = match &identity {
            Some((chain, key)) => {
                let builder =
                    ServerConfig::builder_with_provider(provider()).with_protocol_versions(tls13).map_err(bad)?;
                let builder = match &roots {
                    Some(roots) => builder.with_client_cert_verifier(
                        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
                            .build()
                            .map_err(|e| TlsError::Setup(e.to_string()))?,
                    ),
                    None => builder.with_no_client_auth(),
                };
                Some(Arc::new(builder.with_single_cert(chain.clone(), key.clone_key()).map_err(bad)?))
            }
            None => None,
        };
        let client = match &roots {
            Some(roots) => {
                let builder = ClientConfig::builder_with_provider(provider())
                    .with_protocol_versions(tls13)
                    .map_err(bad)?
                    .with_root_certificates(roots.clone());
                Some(Arc::new(match identity {
                    Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(bad)?,
                    None => builder.with_no_client_auth(),
                }))
            }
            None => None,
        };
        Ok(Self { server, client, server_name: None, peer_name: None })
    }

    /// Whether a listener with this configuration requires client certificates.
    pub fn mutual(&self) -> bool {
        self.server.is_some() && self.client.is_some()
    }

    pub(crate) fn server_connection(&self) -> Result<Connection, TlsError> {
        let config = self.server.clone().ok_or_else(|| {
            TlsError::Setup("listening with TLS needs this side's certificate and private key".into())
        })?;
        Ok(ServerConnection::new(config).map_err(|e| TlsError::Handshake(e.to_string()))?.into())
    }

    pub(crate) fn client_connection(&self, addr: &str) -> Result<Connection, TlsError> {
        let config = self.client.clone().ok_or_else(|| {
            TlsError::Setup("connecting with TLS needs the CA that signed the peer's certificate".into())
        })?;
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => host_of(addr).to_string(),
        };
        let name = ServerName::try_from(name.clone())
            .map_err(|_| TlsError::Setup(format!("{name:?} is not a DNS name or IP address to verify the peer by")))?;
        Ok(ClientConnection::new(config, name).map_err(|e| TlsError::Handshake(e.to_string()))?.into())
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The identity a certificate names: its first subject alternative name that is a DNS
/// name, an IP address or a URI (SPIFFE IDs are URIs), else its common name; control
/// characters escaped and at most 256 characters, as it goes to logs and terminals.
/// `None` for a certificate that names nothing (or does not parse): such certificates
/// would otherwise all share one identity, so where an identity matters they are refused.
pub fn certificate_identity(der: &[u8]) -> Option<String> {
    let raw = raw_identity(der)?;
    let escaped: Vec<char> = raw.chars().flat_map(char::escape_debug).collect();
    let mut shown: String = escaped.iter().take(256).collect();
    if escaped.len() > 256 {
        shown.push('…');
    }
    Some(shown)
}

fn raw_identity(der: &[u8]) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) | GeneralName::URI(d) if !d.is_empty() => return Some(d.to_string()),
                GeneralName::IPAddress(ip) => match *ip {
                    [a, b, c, d] => return Some(std::net::Ipv4Addr::from([*a, *b, *c, *d]).to_string()),
                    v6 => {
                        if let Ok(v6) = <[u8; 16]>::try_from(v6) {
                            return Some(std::net::Ipv6Addr::from(v6).to_string());
                        }
                    }
                },
                _ => {}
            }
        }
    }
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())
        .map(str::to_string)
}

/// Whether `der` is valid for `name` (a DNS name or IP address), as a TLS client checks
/// a server's certificate.
fn valid_for(der: &CertificateDer<'_>, name: &str) -> bool {
    let Ok(name) = ServerName::try_from(name) else { return false };
    webpki::EndEntityCert::try_from(der).is_ok_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
}

/// What a finished handshake established.
#[derive(Debug, Clone)]
pub(crate) struct Established {
    /// The identity in the peer's certificate, if it presented one that names one.
    pub identity: Option<String>,
    /// Whether the peer presented a certificate (verified by the handshake).
    pub certified: bool,
    /// The exporter value bound into the setwise session id.
    pub binding: [u8; 32],
}

/// A TLS connection over a socket: plaintext reads and writes, with the socket's I/O
/// done as rustls needs it.
pub(crate) struct TlsLink<S> {
    pub conn: Connection,
    pub sock: S,
}

/// Reads through to `inner`, keeping the first bytes read: after a failed handshake they
/// tell whether the peer spoke plain setwise.
struct Capture<'a, S> {
    inner: &'a mut S,
    seen: Vec<u8>,
}

impl<S: Read> Read for Capture<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let room = 16usize.saturating_sub(self.seen.len());
        self.seen.extend_from_slice(&buf[..n.min(room)]);
        Ok(n)
    }
}

impl<S: Write> Write for Capture<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Whether `bytes` start like a plain setwise frame: a length prefix, then a hello
/// (tag 1, magic `SETWISE`) or an abort (tag 0xff).
pub(crate) fn looks_like_setwise(bytes: &[u8]) -> bool {
    match bytes.get(4) {
        Some(0x01) => bytes.get(5..12).is_none_or(|m| m == b"SETWISE"),
        Some(0xff) => true,
        _ => false,
    }
}

/// Whether `bytes` start like a TLS record (handshake or alert, version 3.x).
pub(crate) fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
}

impl<S: Read + Write> TlsLink<S> {
    /// Runs the handshake and checks the peer's name.
    pub fn handshake(&mut self, config: &TlsConfig) -> Result<Established, NetError> {
        let mut capture = Capture { inner: &mut self.sock, seen: Vec::new() };
        while self.conn.is_handshaking() {
            if let Err(e) = self.conn.complete_io(&mut capture) {
                if looks_like_setwise(&capture.seen) {
                    return Err(TlsError::PeerWithoutTls.into());
                }
                return Err(map_tls_io(e));
            }
        }
        // Send what is pending (the client's Finished) before the first read.
        while self.conn.wants_write() {
            self.conn.complete_io(&mut self.sock).map_err(map_tls_io)?;
        }
        let peer = self.conn.peer_certificates().and_then(|c| c.first()).cloned();
        let identity = peer.as_ref().and_then(|c| certificate_identity(c));
        if let Some(expected) = &config.peer_name {
            let ok = peer.as_ref().is_some_and(|c| valid_for(c, expected));
            if !ok {
                return Err(TlsError::PeerName {
                    expected: expected.clone(),
                    presented: match (&peer, identity) {
                        (_, Some(name)) => name,
                        (Some(_), None) => "a certificate that names nothing".into(),
                        (None, None) => "no certificate".into(),
                    },
                }
                .into());
            }
        }
        let binding = self
            .conn
            .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
            .map_err(|e| NetError::Tls(TlsError::Handshake(e.to_string())))?;
        Ok(Established { identity, certified: peer.is_some(), binding })
    }

    /// Sends pending TLS records before plaintext I/O.
    fn complete_prior_io(&mut self) -> io::Result<()> {
        if self.conn.is_handshaking() {
            self.conn.complete_io(&mut self.sock)?;
        }
        if self.conn.wants_write() {
            self.conn.complete_io(&mut self.sock)?;
        }
        Ok(())
    }
}

impl<S: Read + Write> Read for TlsLink<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.complete_prior_io()?;
        while self.conn.wants_read() {
            let at_eof = self.conn.complete_io(&mut self.sock)?.0 == 0;
            if at_eof {
                if let Ok(state) = self.conn.process_new_packets()
                    && state.plaintext_bytes_to_read() == 0
                {
                    return Ok(0);
                }
                break;
            }
        }
        self.conn.reader().read(buf)
    }
}

impl<S: Read + Write> Write for TlsLink<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.complete_prior_io()?;
        let n = self.conn.writer().write(buf)?;
        // Push records out now; an error here shows again on the next call or flush.
        let _ = self.conn.complete_io(&mut self.sock);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.complete_prior_io()?;
        self.conn.writer().flush()?;
        while self.conn.wants_write() {
            self.conn.complete_io(&mut self.sock)?;
        }
        self.sock.flush()
    }
}

/// Maps an I/O error that may carry a rustls error (`complete_io` wraps them as
/// `InvalidData`) to a named TLS error; others as plain socket errors.
pub(crate) fn map_tls_io(e: io::Error) -> NetError {
    if let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        return TlsError::from_rustls(tls).into();
    }
    super::frame::map_io(e)
}

/// What a front end asks of a connection's security (CLI flags, Python keywords), and
/// setwise's policy on it in [`TlsOptions::resolve`]: plain TCP only on loopback unless
/// explicitly allowed; a listener needs its certificate and key, a connecting side the CA.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// This party's certificate chain (PEM).
    pub cert: Option<std::path::PathBuf>,
    /// This party's private key (PEM).
    pub key: Option<std::path::PathBuf>,
    /// The CA certificate(s) that must have signed the peer (PEM); on a listener it makes
    /// client certificates mandatory.
    pub ca: Option<std::path::PathBuf>,
    /// The name the listener's certificate must carry, when connecting by address.
    pub server_name: Option<String>,
    /// Refuse a peer whose certificate is not valid for this name.
    pub peer_name: Option<String>,
    /// Allow plain TCP beyond loopback.
    pub insecure_no_tls: bool,
}

impl TlsOptions {
    /// The TLS settings for a channel on `addr` (listened on when `listening`, else
    /// connected to): `None` (plain TCP) only when nothing of TLS is asked for and `addr`
    /// is a loopback address or plain TCP is explicitly allowed.
    pub fn resolve(&self, addr: &str, listening: bool) -> Result<Option<Arc<TlsConfig>>, TlsError> {
        let policy = |m: &str| Err(TlsError::Policy(m.to_string()));
        let any = self.cert.is_some() || self.key.is_some() || self.ca.is_some();
        if self.insecure_no_tls && (any || self.server_name.is_some() || self.peer_name.is_some()) {
            return policy("plain TCP (--insecure-no-tls) and TLS settings exclude each other");
        }
        if !any {
            if self.server_name.is_some() || self.peer_name.is_some() {
                return policy(
                    "a TLS server name or peer name needs TLS: give the CA (--tls-ca) and this side's certificate and key",
                );
            }
            if self.insecure_no_tls || is_loopback(addr) {
                return Ok(None);
            }
            return Err(TlsError::Policy(format!(
                "{addr} is not a loopback address: give a certificate, key and CA (--tls-cert, --tls-key, --tls-ca; \
                 see docs/deployment.md), or allow plain TCP explicitly (--insecure-no-tls) to send everything in the clear"
            )));
        }
        if listening && (self.cert.is_none() || self.key.is_none()) {
            return policy("listening with TLS needs a certificate and its key (--tls-cert and --tls-key)");
        }
        if !listening && self.ca.is_none() {
            return policy("connecting with TLS needs the CA that signed the listener's certificate (--tls-ca)");
        }
        let mut tls = TlsConfig::from_pem_files(self.cert.as_deref(), self.key.as_deref(), self.ca.as_deref())?;
        tls.server_name = self.server_name.clone();
        tls.peer_name = self.peer_name.clone();
        Ok(Some(Arc::new(tls)))
    }
}

/// Whether `addr` (`host:port`) names this machine only: 127.0.0.0/8, ::1 or localhost.
pub fn is_loopback(addr: &str) -> bool {
    let host = host_of(addr);
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_tell_tls_from_setwise() {
        let hello = [&9u32.to_le_bytes()[..], &[0x01], b"SETWISE\0"].concat();
        assert!(looks_like_setwise(&hello) && !looks_like_tls(&hello));
        let abort = [&3u32.to_le_bytes()[..], &[0xff, 0, 0]].concat();
        assert!(looks_like_setwise(&abort));
        let client_hello = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
        assert!(looks_like_tls(&client_hello) && !looks_like_setwise(&client_hello));
        assert!(!looks_like_tls(&[0x16, 0x04, 0x01]));
    }

    /// A self-signed certificate with these subject alternative names and common name.
    fn cert(sans: Vec<rcgen::SanType>, cn: Option<&str>) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = sans;
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        }
        params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap().der().to_vec()
    }

    #[test]
    fn identities_come_from_dns_ip_and_uri_names_and_unnamed_certificates_have_none() {
        use rcgen::SanType;
        let uri = |s: &str| SanType::URI(s.try_into().unwrap());
        let dns = |s: &str| SanType::DnsName(s.try_into().unwrap());
        let id = |sans, cn| certificate_identity(&cert(sans, cn));
        assert_eq!(id(vec![dns("bob.example")], Some("cn")).as_deref(), Some("bob.example"));
        assert_eq!(id(vec![uri("spiffe://acme/lab")], None).as_deref(), Some("spiffe://acme/lab"));
        assert_eq!(id(vec![SanType::IpAddress([10, 0, 0, 7].into())], None).as_deref(), Some("10.0.0.7"));
        assert_eq!(id(vec![SanType::IpAddress("::1".parse().unwrap())], None).as_deref(), Some("::1"));
        assert_eq!(id(vec![], Some("carol")).as_deref(), Some("carol"));
        // Before: both were "an unnamed certificate", one identity for all of them.
        assert_eq!(id(vec![], None), None);
        assert_eq!(id(vec![], Some("")), None);
        assert_eq!(certificate_identity(b"not a certificate"), None);
        let odd = id(vec![], Some("a\u{1b}[31m")).unwrap();
        assert!(!odd.contains('\u{1b}'), "{odd}");
    }

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("bob.example:7000"), "bob.example");
        assert_eq!(host_of("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(host_of("[::1]:1"), "::1");
    }
}
