//! `setwise tls init`: a throwaway CA and a certificate per party, for trying TLS and
//! mutual TLS out. Real deployments bring their own PKI (docs/deployment.md).

use crate::Failure;
use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use setwise::io::write_atomic;
use std::path::{Path, PathBuf};

/// `setwise tls …`.
#[derive(Subcommand)]
pub enum TlsCommand {
    /// Write a test CA (DIR/ca.pem, DIR/ca.key) and, per name, DIR/NAME.pem and DIR/NAME.key
    /// (keys 0600). A CA already in DIR is reused, so names can be added later.
    Init(InitArgs),
}

/// `setwise tls init`.
#[derive(Args)]
pub struct InitArgs {
    /// Directory to write to (created if missing).
    dir: PathBuf,
    /// The parties: each gets a certificate for this DNS name, usable as TLS server and
    /// client (e.g. alice,bob,judge).
    #[arg(long, value_delimiter = ',', required = true)]
    names: Vec<String>,
    /// Last day the new certificates are valid (YYYY-MM-DD); default: a year from today.
    #[arg(long)]
    not_after: Option<String>,
}

/// Runs `setwise tls …`.
pub fn run_tls(command: TlsCommand) -> Result<(), Failure> {
    match command {
        TlsCommand::Init(a) => init(&a),
    }
}

fn usage(what: impl std::fmt::Display) -> Failure {
    Failure::usage(anyhow::anyhow!("tls init: {what}"))
}

fn init(a: &InitArgs) -> Result<(), Failure> {
    std::fs::create_dir_all(&a.dir).map_err(|e| usage(format!("{}: {e}", a.dir.display())))?;
    let not_after = match &a.not_after {
        Some(d) => {
            let (y, m, d) =
                parse_date(d).ok_or_else(|| usage(format!("--not-after {d:?} is not a date YYYY-MM-DD")))?;
            rcgen::date_time_ymd(y, m, d)
        }
        None => {
            let (y, m, d) = today();
            rcgen::date_time_ymd(y + 1, m, d.min(28))
        }
    };
    let (ca_pem, ca_key_path) = (a.dir.join("ca.pem"), a.dir.join("ca.key"));
    let issuer = if ca_pem.exists() && ca_key_path.exists() {
        let key =
            KeyPair::from_pem(&read(&ca_key_path)?).map_err(|e| usage(format!("{}: {e}", ca_key_path.display())))?;
        Issuer::from_ca_cert_pem(&read(&ca_pem)?, key).map_err(|e| usage(format!("{}: {e}", ca_pem.display())))?
    } else {
        let key = KeyPair::generate().map_err(usage)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(usage)?;
        // A name of its own, so that two test CAs are told apart by name, not only by key.
        let id: u32 = rand::random();
        params.distinguished_name.push(DnType::CommonName, format!("setwise test CA {id:08x}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_after = rcgen::date_time_ymd(today().0 + 10, 1, 1);
        let cert = params.self_signed(&key).map_err(usage)?;
        write(&ca_key_path, &key.serialize_pem(), true)?;
        write(&ca_pem, &cert.pem(), false)?;
        eprintln!("tls init: new CA {} (its key {})", ca_pem.display(), ca_key_path.display());
        Issuer::new(params, key)
    };
    for name in &a.names {
        let key = KeyPair::generate().map_err(usage)?;
        let mut params = CertificateParams::new(vec![name.clone()]).map_err(|e| usage(format!("{name:?}: {e}")))?;
        params.distinguished_name.push(DnType::CommonName, name.as_str());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.not_after = not_after;
        let cert = params.signed_by(&key, &issuer).map_err(usage)?;
        write(&a.dir.join(format!("{name}.key")), &key.serialize_pem(), true)?;
        write(&a.dir.join(format!("{name}.pem")), &cert.pem(), false)?;
        eprintln!("tls init: {name}: {0}/{name}.pem and {0}/{name}.key", a.dir.display());
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))
}

fn write(path: &Path, text: &str, private: bool) -> Result<(), Failure> {
    write_atomic(path, text.as_bytes(), private).map_err(|e| usage(format!("{}: {e}", path.display())))
}

/// A valid calendar date `YYYY-MM-DD` (rcgen panics on an invalid one).
fn parse_date(s: &str) -> Option<(i32, u8, u8)> {
    let mut parts = s.splitn(3, '-').map(str::parse::<i32>);
    let (y, m, d) = (parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    ((1970..=9999).contains(&y) && (1..=days).contains(&d)).then_some((y, m as u8, d as u8))
}

/// Today's date (UTC) from the system clock: (year, month, day).
fn today() -> (i32, u8, u8) {
    let days = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("2020-02-29"), Some((2020, 2, 29)));
        assert!(parse_date("2021-02-29").is_none() && parse_date("2020-04-31").is_none());
        assert!(parse_date("2020-13-01").is_none() && parse_date("yesterday").is_none());
        let (y, m, d) = today();
        assert!(y >= 2024 && (1..=12).contains(&m) && (1..=31).contains(&d));
    }
}
