//! The protocol registry: [`ALL`], the one list of the protocols' [`Spec`]s (each declared
//! in its family's own module), and the lookups. Everything that needs a fact about a
//! protocol (its name, operations, security, who brings what, what it leaks) asks its
//! spec instead of matching on [`Protocol`].

use super::params::no_params;
use super::spec::{Leakage, Spec, Takes, values_for_sum};
use super::{
    Call, Operation, Outcome, Protocol, Report, Role, Security, authorized, compact, ecdh, fhe, mqrpmt, unbalanced,
    vole,
};
use crate::error::{Error, Result};
use crate::net::Channel;

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

/// The protocol a run takes when none is named: the CLI's and Python's default.
pub static DEFAULT: &Spec = &ecdh::SPEC;

/// The protocol a staged run (`setwise stage`, `setwise.spark.run`) takes when none is
/// named: `auto`, which picks a replayed protocol per operation and sizes
/// (`session::auto::choose_staged`).
pub static STAGED_DEFAULT: &Spec = &AUTO;

impl Spec {
    /// The spec of the protocol a judge serves: its clients ask for authorisations in
    /// any mode, and the request says which.
    pub fn judged() -> &'static Spec {
        ALL.iter()
            .copied()
            .find(|s| {
                s.operations.contains(&Operation::Authorize)
                    && s.takes(Operation::Authorize, Role::Judge) == Takes::Judge
            })
            .expect("a protocol in ALL is judged")
    }

    /// The spec named `name`, if any.
    pub fn named(name: &str) -> Option<&'static Spec> {
        ALL.iter().copied().find(|s| s.name == name)
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Auto` reads as
// before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// Chosen after the hello from the operation and both set sizes
    /// ([`session::auto`](crate::session::auto)).
    pub const Auto: Protocol = Protocol::declared_by(&AUTO);
}

/// `auto`: not a protocol of its own, but the name under which both sides let the hello
/// pick one (`session::auto`).
pub static AUTO: Spec = Spec {
    name: "auto",
    operations: Operation::OF_TWO_PARTIES,
    // It picks a protocol that meets the job's security, malicious included.
    security: Security::Malicious,
    reveal_both: &[Operation::Intersection, Operation::Cardinality],
    // What the replayed protocols stage (`session::auto::choose_staged`).
    staged: &[Operation::Intersection, Operation::Cardinality, Operation::Sum, Operation::Union, Operation::PrivateId],
    own_stages: false,
    live_role_bytes: 0,
    takes: values_for_sum,
    leakage: Leakage {
        model: "that of the protocol it picks",
        text: "auto picks a protocol after the hello from the operation, the security asked for and \
               both set sizes; the run then leaks what that protocol leaks (the report names it).",
        doc: "docs/benchmarks.md",
    },
    page: include_str!("../../../../docs/benchmarks.md"),
    demo_items: 1 << 20,
    options: &[],
    params: no_params,
    roles: auto_roles,
};

/// `auto` has no roles of its own: the session runs those of the protocol it picked.
fn auto_roles(_: &mut dyn Channel, _: Call<'_>, _: &mut Report) -> Result<Outcome> {
    Err(Error::usage("protocol", "auto runs the roles of the protocol it picks after the hello, none of its own"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::Named;

    #[test]
    fn each_familys_constant_is_its_spec_in_the_registry() {
        let named = [
            (Protocol::Ecdh, "ecdh"),
            (Protocol::Fhe, "fhe"),
            (Protocol::Unbalanced, "unbalanced"),
            (Protocol::Authorized, "authorized"),
            (Protocol::Partial, "partial"),
            (Protocol::Compact, "compact"),
            (Protocol::Mqrpmt, "mqrpmt"),
            (Protocol::Vole, "vole"),
            (Protocol::Auto, "auto"),
        ];
        assert_eq!(named.len(), ALL.len(), "a protocol without a constant here, or one too many");
        for (p, name) in named {
            assert_eq!(p.name(), name);
            assert!(ALL.iter().any(|s| std::ptr::eq(*s, p.spec())), "{name} is in ALL");
            assert_eq!(name.parse::<Protocol>().unwrap(), p);
        }
    }

    #[test]
    fn every_protocol_has_one_spec_with_a_distinct_name() {
        for (i, s) in ALL.iter().enumerate() {
            assert!(std::ptr::eq(s.protocol().spec(), *s), "{} is the spec of its protocol", s.name);
            assert!(ALL[..i].iter().all(|t| t.name != s.name && !std::ptr::eq(*t, *s)), "{} twice", s.name);
            assert!(Spec::named(s.name).is_some_and(|t| std::ptr::eq(t, *s)), "{} is found by its name", s.name);
            assert!(
                s.reveal_both.iter().all(|op| s.operations.contains(op)),
                "{}: reveal of an operation it lacks",
                s.name
            );
            let defaults = (s.params)(&Named::none());
            assert!(defaults.is_ok(), "{}: its defaults need no option", s.name);
            for o in s.options {
                assert!(s.option(o.name).is_some() && !o.help.is_empty(), "{}: {}", s.name, o.name);
                for v in o.values {
                    s.params(&Named::none().with(o.name, Some(*v)))
                        .unwrap_or_else(|e| panic!("{} {}={v}: {e}", s.name, o.name));
                }
            }
            let unknown = s.params(&Named::none().with("no_such_option", Some("1"))).unwrap_err().to_string();
            assert!(unknown.contains("no_such_option") && unknown.contains(s.name), "{unknown}");
            let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(s.leakage.doc);
            assert_eq!(
                std::fs::read_to_string(&doc).ok().as_deref(),
                Some(s.page),
                "{}: page is {}",
                s.name,
                s.leakage.doc
            );
        }
    }
}
