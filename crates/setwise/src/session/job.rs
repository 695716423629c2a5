//! What to run: the protocol, the operation and the typed parameters both sides agree
//! on, and their one canonical encoding in the hello.

use crate::crypto::bls12_381::G2Affine;
use crate::error::{Error, Result};
use crate::io::hex;
use crate::protocols::authorized::{self, Mode};
use crate::protocols::params::{AuthorizedJob, Named, ProtocolParams};
use crate::protocols::{MAX_SET_SIZE, Operation, Protocol, Reveal, Role, Security, SumTo, registry};

/// What to run.
///
/// Both sides build the same job: the hello carries its canonical encoding
/// ([`Job::hello_params`]) and a difference in any field ends both runs with an error
/// naming it. Fields that only one side has (a receiver's expected database
/// fingerprint) stay out of the hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The protocol family.
    pub protocol: Protocol,
    /// The operation.
    pub operation: Operation,
    /// Number of key columns joined into each item; both sides must use the same.
    pub key_columns: usize,
    /// The protocol's own parameters.
    pub params: ProtocolParams,
    /// Who learns the result ([`Reveal::Both`]: the receiver tells the sender).
    pub reveal: Reveal,
    /// The largest set this side accepts the peer to announce (at most, and by default,
    /// [`MAX_SET_SIZE`]): a server's cap on the work and memory one peer can ask of it,
    /// since some protocols (`vole`, `fhe`) allocate by the peer's size. Not part of the
    /// hello: each side sets its own.
    pub max_peer_size: u64,
    /// The adversary the run must withstand: a protocol proven only against semi-honest
    /// peers is refused under [`Security::Malicious`], and `auto` picks accordingly.
    pub security: Security,
    /// Who learns the sum of [`Operation::Sum`] (the sender, who holds the values, unless
    /// asked otherwise); only `sum` takes [`SumTo::Receiver`].
    pub sum_to: SumTo,
}

impl Job {
    /// A job with one key column and the protocol's default parameters.
    pub fn new(protocol: Protocol, operation: Operation) -> Self {
        let params = protocol.spec().default_params();
        Self {
            protocol,
            operation,
            key_columns: 1,
            params,
            reveal: Reveal::Receiver,
            max_peer_size: MAX_SET_SIZE,
            security: Security::SemiHonest,
            sum_to: SumTo::Sender,
        }
    }

    /// A judge's job: it answers a client's request for an authorisation in any mode.
    pub fn judge() -> Self {
        Self::new(crate::protocols::Spec::judged().protocol(), Operation::Authorize)
    }

    /// The job `auto` resolved to: `protocol` with its default parameters, the same
    /// operation, key columns, reveal, security and sum's recipient.
    pub fn resolved(self, protocol: Protocol) -> Self {
        Self {
            key_columns: self.key_columns,
            reveal: self.reveal,
            sum_to: self.sum_to,
            max_peer_size: self.max_peer_size,
            security: self.security,
            ..Self::new(protocol, self.operation)
        }
    }

    /// The same job accepting a peer of at most `n` items (capped at [`MAX_SET_SIZE`]).
    pub fn with_max_peer_size(mut self, n: u64) -> Self {
        self.max_peer_size = n.min(MAX_SET_SIZE);
        self
    }

    /// The same job withstanding `security`.
    pub fn with_security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }

    /// The same job giving the sum of `sum` to `sum_to`.
    pub fn with_sum_to(mut self, sum_to: SumTo) -> Self {
        self.sum_to = sum_to;
        self
    }

    /// The same job with `n` key columns.
    pub fn with_key_columns(mut self, n: usize) -> Self {
        self.key_columns = n;
        self
    }

    /// The same job with its protocol's parameters set from the options `named` (a
    /// frontend's flags or keywords); an option the protocol does not take is refused.
    pub fn with_options(self, named: &Named) -> Result<Self> {
        let params = self.protocol.spec().params(named)?;
        Ok(self.with_params(params))
    }

    /// The same job with these parameters.
    pub fn with_params(mut self, params: ProtocolParams) -> Self {
        self.params = params;
        self
    }

    /// The same job with the result revealed to `reveal`.
    pub fn with_reveal(mut self, reveal: Reveal) -> Self {
        self.reveal = reveal;
        self
    }

    /// An authorised intersection for the client `client_id` under the judge key `pk`
    /// (`protocol` is `authorized` or `partial`).
    pub fn authorized(protocol: Protocol, client_id: &[u8], pk: G2Affine) -> Self {
        Self::new(protocol, Operation::Intersection).with_params(ProtocolParams::Authorized(AuthorizedJob {
            client_id: client_id.to_vec(),
            judge_key: Some(pk),
        }))
    }

    /// An authorisation of the client `client_id`'s items by a judge, in `mode`.
    pub fn authorize(mode: Mode, client_id: &[u8]) -> Self {
        Self::new(mode.protocol(), Operation::Authorize)
            .with_params(ProtocolParams::Authorized(AuthorizedJob { client_id: client_id.to_vec(), judge_key: None }))
    }

    /// Checks that the protocol implements the operation, that `role` plays in it and
    /// that the parameters belong to the protocol and are complete.
    pub fn validate(&self, role: Role) -> Result<()> {
        if !self.protocol.operations().contains(&self.operation) {
            let ops: Vec<&str> = self.protocol.operations().iter().map(|o| o.name()).collect();
            return Err(Error::params(
                "operation",
                format!("protocol {} has no operation {} (it has: {})", self.protocol, self.operation, ops.join(", ")),
            ));
        }
        if (role == Role::Judge) != (self.operation == Operation::Authorize && role != Role::Receiver) {
            return Err(Error::usage(
                "role",
                format!("a {role} takes no part in {} {}", self.protocol, self.operation),
            ));
        }
        if self.key_columns == 0 {
            return Err(Error::params("key_columns", "key_columns: at least one key column".into()));
        }
        // Parameters fit a protocol when they are of the kind its defaults are.
        let own = self.protocol.spec().default_params();
        if std::mem::discriminant(&own) != std::mem::discriminant(&self.params) {
            return Err(Error::usage("params", format!("protocol {} does not take {:?}", self.protocol, self.params)));
        }
        if self.reveal == Reveal::Both && !Reveal::supported(self.protocol, self.operation) {
            let able: Vec<&str> =
                registry::ALL.iter().filter(|s| s.reveal_both.contains(&self.operation)).map(|s| s.name).collect();
            let (protocol, op) = (self.protocol, self.operation);
            let others = match able.as_slice() {
                [] => format!("no protocol reveals {op}"),
                _ => format!("for {op} use one of: {}", able.join(", ")),
            };
            return Err(Error::usage("reveal", format!("--reveal both is not for {protocol} {op}; {others}")));
        }
        self.sum_to.check(self.operation)?;
        if self.security > self.protocol.security() {
            let able: Vec<&str> = registry::ALL
                .iter()
                .filter(|s| s.security >= self.security && s.operations.contains(&self.operation))
                .map(|s| s.name)
                .collect();
            return Err(Error::usage(
                "security",
                format!(
                    "{} is secure against {} peers only; for {} {} use one of: {}",
                    self.protocol,
                    self.protocol.security(),
                    self.security,
                    self.operation,
                    able.join(", ")
                ),
            ));
        }
        if let ProtocolParams::Mqrpmt(m) = &self.params {
            m.check()?;
        }
        if let ProtocolParams::Authorized(a) = &self.params {
            if a.client_id.len() > authorized::MAX_CLIENT_ID {
                return Err(Error::params(
                    "client_id",
                    format!("client_id: {} bytes, at most {}", a.client_id.len(), authorized::MAX_CLIENT_ID),
                ));
            }
            let intersect = self.operation == Operation::Intersection;
            if intersect && a.judge_key.is_none() {
                return Err(Error::params(
                    "judge_key",
                    format!("{}: the judge's public key is needed (judge_key; the CLI's --judge-key)", self.protocol),
                ));
            }
            if (intersect || role == Role::Receiver) && a.client_id.is_empty() {
                return Err(Error::params(
                    "client_id",
                    format!("{}: the client identity is needed (client_id; the CLI's --client-id)", self.protocol),
                ));
            }
        }
        Ok(())
    }

    /// The protocol and operation names the hello carries. An authorisation is one
    /// session type whatever the mode (the client's request says which): `judge`,
    /// `authorize`.
    pub fn hello_names(&self) -> (&'static str, &'static str) {
        match self.operation {
            Operation::Authorize => ("judge", "authorize"),
            op => (self.protocol.name(), op.name()),
        }
    }

    /// The canonical parameter string of the hello: `key=value` pairs joined by `;`, in a
    /// fixed order, holding exactly what both sides must agree on.
    pub fn hello_params(&self) -> String {
        let mut fields = vec![("key_columns", self.key_columns.to_string())];
        match (&self.params, self.operation) {
            (ProtocolParams::Mqrpmt(m), _) => {
                fields.push(("rpmt", m.construction.name().to_string()));
                fields.push(("last_move", m.last_move.name().to_string()));
            }
            (ProtocolParams::Authorized(a), Operation::Intersection) => {
                fields.push(("client_id", hex(&a.client_id)));
                fields.push(("judge", a.judge_key.as_ref().map_or_else(String::new, authorized::key_fingerprint)));
            }
            _ => {}
        }
        // Only when it differs from the default, so older hellos stay canonical.
        if self.reveal == Reveal::Both {
            fields.push(("reveal", self.reveal.name().to_string()));
        }
        if self.security != Security::SemiHonest {
            fields.push(("security", self.security.name().to_string()));
        }
        if self.sum_to != SumTo::Sender {
            fields.push(("sum_to", self.sum_to.name().to_string()));
        }
        fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::authorized::JudgeKey;
    use crate::protocols::mqrpmt::{Construction, LastMove, MqrpmtParams};
    use crate::protocols::params::UnbalancedJob;

    #[test]
    fn hello_params_are_canonical() {
        assert_eq!(Job::new(Protocol::Ecdh, Operation::Intersection).hello_params(), "key_columns=1");
        let m = Job::new(Protocol::Mqrpmt, Operation::Sum)
            .with_key_columns(2)
            .with_params(ProtocolParams::Mqrpmt(MqrpmtParams { last_move: LastMove::Shuffle, ..Default::default() }));
        assert_eq!(m.hello_params(), "key_columns=2;rpmt=cwprf;last_move=shuffle");
        let p = Job::new(Protocol::Mqrpmt, Operation::Cardinality)
            .with_params(ProtocolParams::Mqrpmt(MqrpmtParams::of(Construction::Poprf)));
        assert_eq!(p.hello_params(), "key_columns=1;rpmt=poprf;last_move=shuffle");
        let key = JudgeKey::generate();
        let a = Job::authorized(Protocol::Partial, b"ab", *key.public()).with_key_columns(3);
        let p = a.hello_params();
        assert!(p.starts_with("key_columns=3;client_id=6162;judge=") && p.len() > 40, "{p}");
        assert_eq!(Job::authorize(Mode::Full, b"ab").hello_params(), "key_columns=1");
        assert_eq!(Job::authorize(Mode::Partial, b"ab").hello_names(), ("judge", "authorize"));
        let both = Job::new(Protocol::Ecdh, Operation::Cardinality).with_reveal(Reveal::Both);
        assert_eq!(both.hello_params(), "key_columns=1;reveal=both");
        let malicious = Job::new(Protocol::Auto, Operation::Intersection).with_security(Security::Malicious);
        assert_eq!(malicious.hello_params(), "key_columns=1;security=malicious");
        // The sum's recipient only when it is not the default, so older hellos stay as
        // they were; auto keeps it when it resolves.
        let reverse = Job::new(Protocol::Auto, Operation::Sum).with_sum_to(SumTo::Receiver);
        assert_eq!(reverse.hello_params(), "key_columns=1;sum_to=receiver");
        let resolved = reverse.resolved(Protocol::Mqrpmt);
        assert_eq!(resolved.hello_params(), "key_columns=1;rpmt=cwprf;last_move=bloom;sum_to=receiver");
        assert_eq!(
            Job::new(Protocol::Mqrpmt, Operation::Sum).with_sum_to(SumTo::Sender),
            m.with_key_columns(1).with_params(ProtocolParams::Mqrpmt(MqrpmtParams::default()))
        );
    }

    #[test]
    fn only_a_sum_goes_to_the_receiver() {
        Job::new(Protocol::Mqrpmt, Operation::Sum).with_sum_to(SumTo::Receiver).validate(Role::Sender).unwrap();
        for op in [Operation::Cardinality, Operation::Intersection, Operation::Shares] {
            let e = Job::new(Protocol::Mqrpmt, op).with_sum_to(SumTo::Receiver).validate(Role::Receiver).unwrap_err();
            assert!(
                matches!(&e, Error::Usage { what: "sum_to", why } if why.contains(&format!("not {op}"))),
                "{op}: {e}"
            );
        }
        assert_eq!("receiver".parse::<SumTo>().unwrap(), SumTo::Receiver);
        assert!("both".parse::<SumTo>().unwrap_err().to_string().contains("sender"));
    }

    #[test]
    fn named_options_set_the_protocols_parameters_and_others_are_refused() {
        let named = Named::none().with("rpmt", Some("poprf"));
        let job = Job::new(Protocol::Mqrpmt, Operation::Cardinality).with_options(&named).unwrap();
        assert_eq!(job.params, ProtocolParams::Mqrpmt(MqrpmtParams::of(Construction::Poprf)));
        let e = Job::new(Protocol::Ecdh, Operation::Intersection).with_options(&named).unwrap_err();
        assert!(
            matches!(&e, Error::Unknown(u) if u.what == "option" && u.expected == "an option of ecdh, which takes none"),
            "{e}"
        );
        let bad = Named::none().with("last_move", Some("sorted"));
        let e = Job::new(Protocol::Mqrpmt, Operation::Union).with_options(&bad).unwrap_err();
        assert!(e.to_string().contains("sorted"), "{e}");
        let fp = Named::none().with("fingerprint", Some("ab12"));
        let job = Job::new(Protocol::Unbalanced, Operation::Intersection).with_options(&fp).unwrap();
        assert_eq!(job.params, ProtocolParams::Unbalanced(UnbalancedJob { fingerprint: Some("ab12".into()) }));
        let key = JudgeKey::generate();
        let auth = Named::none()
            .with("client_id", Some("lab"))
            .with("judge_key", Some(authorized::public_key_hex(key.public())));
        let job = Job::new(Protocol::Partial, Operation::Intersection).with_options(&auth).unwrap();
        assert_eq!(job, Job::authorized(Protocol::Partial, b"lab", *key.public()));
        let e = Job::new(Protocol::Authorized, Operation::Intersection)
            .with_options(&Named::none().with("judge_key", Some("zz")))
            .unwrap_err();
        assert!(e.to_string().contains("judge"), "{e}");
        assert_eq!(Job::judge().hello_names(), ("judge", "authorize"));
        Job::judge().validate(Role::Judge).unwrap();
    }

    #[test]
    fn malicious_security_refuses_a_semi_honest_protocol() {
        let m = |p| Job::new(p, Operation::Intersection).with_security(Security::Malicious).validate(Role::Sender);
        let e = m(Protocol::Ecdh).unwrap_err().to_string();
        assert!(e.contains("ecdh is secure against semi-honest peers only"), "{e}");
        assert!(e.ends_with("for malicious intersection use one of: compact, vole, auto"), "{e}");
        m(Protocol::Compact).unwrap();
        m(Protocol::Vole).unwrap();
        m(Protocol::Auto).unwrap();
    }

    #[test]
    fn validation_names_what_is_missing() {
        let bad_op = Job::new(Protocol::Fhe, Operation::Sum).validate(Role::Sender).unwrap_err();
        assert!(bad_op.to_string().contains("has no operation sum"), "{bad_op}");
        let judge = Job::new(Protocol::Ecdh, Operation::Intersection).validate(Role::Judge).unwrap_err();
        assert!(judge.to_string().contains("judge takes no part"), "{judge}");
        let no_key = Job::new(Protocol::Authorized, Operation::Intersection).validate(Role::Sender).unwrap_err();
        assert!(no_key.to_string().contains("public key"), "{no_key}");
        let wrong = Job::new(Protocol::Ecdh, Operation::Intersection)
            .with_params(ProtocolParams::Mqrpmt(MqrpmtParams::default()))
            .validate(Role::Sender)
            .unwrap_err();
        assert!(wrong.to_string().contains("does not take"), "{wrong}");
        let reveal = Job::new(Protocol::Mqrpmt, Operation::Union).with_reveal(Reveal::Both);
        let reveal = reveal.validate(Role::Sender).unwrap_err();
        assert!(reveal.to_string().contains("is not for mqrpmt union; no protocol reveals union"), "{reveal}");
        let unbalanced = Job::new(Protocol::Unbalanced, Operation::Intersection).with_reveal(Reveal::Both);
        let unbalanced = unbalanced.validate(Role::Receiver).unwrap_err().to_string();
        assert!(
            unbalanced.ends_with("for intersection use one of: ecdh, fhe, compact, mqrpmt, vole, auto"),
            "{unbalanced}"
        );
        // Each names what is at fault, for a frontend to point at.
        assert_eq!([reveal.field(), judge.field(), wrong.field()], [Some("reveal"), Some("role"), Some("params")]);
        Job::new(Protocol::Compact, Operation::Intersection).with_reveal(Reveal::Both).validate(Role::Sender).unwrap();
        let poprf = |last_move| {
            Job::new(Protocol::Mqrpmt, Operation::Union)
                .with_params(ProtocolParams::Mqrpmt(MqrpmtParams { construction: Construction::Poprf, last_move }))
        };
        let bloom = poprf(LastMove::Bloom).validate(Role::Receiver).unwrap_err();
        assert!(
            matches!(&bloom, Error::Params { field: "last_move", why } if why.contains("poprf construction has no Bloom-filter")),
            "{bloom}"
        );
        poprf(LastMove::Shuffle).validate(Role::Receiver).unwrap();
        Job::authorize(Mode::Full, b"id").validate(Role::Judge).unwrap();
        Job::authorize(Mode::Full, b"id").validate(Role::Receiver).unwrap();
        assert!(Job::authorize(Mode::Full, b"").validate(Role::Receiver).is_err());
    }
}
