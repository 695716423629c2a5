//! The protocol registry: [`ALL`], the one list of the protocols' [`Spec`]s (each declared
//! in its family's own module), and the lookups. Everything that needs a fact about a
//! protocol (its name, operations, security, who brings what, what it leaks) asks its
//! spec instead of matching on [`Protocol`].

use super::spec::{Leakage, Spec, values_for_sum};
use super::{Operation, Protocol, Security, authorized, compact, ecdh, fhe, mqrpmt, unbalanced, vole};

/// Every protocol, in the order the CLI lists them; `auto` last. A new protocol adds its
/// spec here.
pub static ALL: &[&Spec] = &[
    &ecdh::SPEC,
    &fhe::SPEC,
    &unbalanced::SPEC,
    &authorized::SPEC,
    &authorized::PARTIAL_SPEC,
    &compact::SPEC,
    &mqrpmt::SPEC,
    &vole::SPEC,
    &AUTO,
];

impl Spec {
    /// The spec of `protocol`.
    pub fn of(protocol: Protocol) -> &'static Spec {
        ALL.iter().copied().find(|s| s.protocol == protocol).expect("every protocol has a spec in ALL")
    }

    /// The spec named `name`, if any.
    pub fn named(name: &str) -> Option<&'static Spec> {
        ALL.iter().copied().find(|s| s.name == name)
    }
}

/// `auto`: not a protocol of its own, but the name under which both sides let the hello
/// pick one (`session::auto`).
pub static AUTO: Spec = Spec {
    protocol: Protocol::Auto,
    name: "auto",
    operations: Operation::OF_TWO_PARTIES,
    // It picks a protocol that meets the job's security, malicious included.
    security: Security::Malicious,
    reveal_both: &[Operation::Intersection, Operation::Cardinality],
    staged: &[],
    takes: values_for_sum,
    leakage: Leakage {
        model: "that of the protocol it picks",
        text: "auto picks a protocol after the hello from the operation, the security asked for and \
               both set sizes; the run then leaks what that protocol leaks (the report names it).",
        doc: "docs/benchmarks.md",
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_one_spec_with_a_distinct_name() {
        for (i, s) in ALL.iter().enumerate() {
            assert!(std::ptr::eq(Spec::of(s.protocol), *s), "{} is the spec of its protocol", s.name);
            assert!(ALL[..i].iter().all(|t| t.name != s.name && t.protocol != s.protocol), "{} twice", s.name);
            assert_eq!(Spec::named(s.name).map(|t| t.protocol), Some(s.protocol));
            assert!(
                s.reveal_both.iter().all(|op| s.operations.contains(op)),
                "{}: reveal of an operation it lacks",
                s.name
            );
            assert!(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(s.leakage.doc).is_file(),
                "{}",
                s.leakage.doc
            );
        }
    }
}
