//! What a protocol declares about itself: its [`Spec`], the type every family's module
//! fills in once (`SPEC`) and [`registry`](super::registry) lists.

use super::params::{Named, OptionDoc, ProtocolParams};
use super::{Operation, Protocol, Role, Roles, Security};
use crate::error::{Result, UnknownName};

/// What one protocol is, as the library, the CLI, the report page and the Python
/// bindings see it.
#[derive(Debug)]
pub struct Spec {
    /// Its CLI and wire name.
    pub name: &'static str,
    /// The operations it implements.
    pub operations: &'static [Operation],
    /// The strongest adversary it withstands in both roles (docs/protocols/).
    pub security: Security,
    /// The operations whose result the receiver can also tell the sender (`--reveal
    /// both`).
    pub reveal_both: &'static [Operation],
    /// What a role brings to an operation.
    pub takes: fn(Operation, Role) -> Takes,
    /// The operations a staged run (`setwise stage`, Spark) can run bucket by bucket
    /// (crate::staged: ecdh by its own steps, the others by replay).
    pub staged: &'static [Operation],
    /// Whether its staged runs use stages of its own (`staged::ecdh`, which work on any
    /// storage a cluster writes) rather than replaying its roles.
    pub own_stages: bool,
    /// Bytes a role of a replayed staged run holds per item of its bucket (the larger
    /// of its own and its peer's counts) while it is kept alive between stages, as
    /// measured with `setwise stage run` (docs/scale-out.md, "Memory"); what a memory
    /// budget counts ([`crate::staged::work::Worker::limit_live`]). 0 where no role is
    /// kept alive.
    pub live_role_bytes: usize,
    /// What a run leaks beyond its output.
    pub leakage: Leakage,
    /// Its page (the file [`Leakage::doc`] names), as the browser demo serves it.
    pub page: &'static str,
    /// The most items a party may bring to the browser demo (`setwise ui`), which keeps
    /// its runs to seconds.
    pub demo_items: usize,
    /// The options a frontend may name for it (CLI flags, Python keywords).
    pub options: &'static [OptionDoc],
    /// Its parameters from the options named (none named: its defaults); called by
    /// [`Spec::params`] once the names are known to be its options.
    pub params: fn(&Named) -> Result<ProtocolParams>,
    /// Its roles: the session's one dispatch calls it with the job, the agreed context and
    /// the role's input, after its checks against this spec.
    pub roles: Roles,
}

impl Spec {
    /// The protocol it declares.
    pub fn protocol(&'static self) -> Protocol {
        Protocol::declared_by(self)
    }

    /// What `role` brings to `operation`.
    pub fn takes(&self, operation: Operation, role: Role) -> Takes {
        (self.takes)(operation, role)
    }

    /// Its option named `name`, if it takes one.
    pub fn option(&self, name: &str) -> Option<&'static OptionDoc> {
        self.options.iter().find(|o| o.name == name)
    }

    /// Its parameters from the options `named`; an option it does not take is refused
    /// by name, with the ones it does.
    pub fn params(&self, named: &Named) -> Result<ProtocolParams> {
        if let Some(name) = named.names().find(|n| self.option(n).is_none()) {
            let takes: Vec<&str> = self.options.iter().map(|o| o.name).collect();
            let expected = match takes.as_slice() {
                [] => format!("an option of {}, which takes none", self.name),
                _ => format!("an option of {}: {}", self.name, takes.join(", ")),
            };
            return Err(UnknownName::new("option", name, expected).into());
        }
        (self.params)(named)
    }

    /// Its parameters when no option is named.
    pub fn default_params(&self) -> ProtocolParams {
        // A spec's defaults need no option (the registry's test checks every spec).
        (self.params)(&Named::none()).expect("a protocol's defaults need no option")
    }
}

/// What a role brings to a run (the kinds of [`Input`](super::Input)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// Its distinct items.
    Items,
    /// Its distinct items, a value per item and the values' bound (`sum`'s sender).
    Values,
    /// A preprocessed database (`unbalanced`'s sender).
    Database,
    /// Its items and a judge's credentials on them (an authorised client).
    Credentials,
    /// A judge's key and policy.
    Judge,
}

impl Takes {
    /// Its name in errors.
    pub fn name(self) -> &'static str {
        match self {
            Takes::Items => "items",
            Takes::Values => "items with values",
            Takes::Database => "a database",
            Takes::Credentials => "items with credentials",
            Takes::Judge => "a judge's key and policy",
        }
    }
}

/// Every role brings its items.
pub fn items_only(_: Operation, _: Role) -> Takes {
    Takes::Items
}

/// Every role brings its items, but `sum`'s sender, which brings values with them.
pub fn values_for_sum(op: Operation, role: Role) -> Takes {
    match (op, role) {
        (Operation::Sum, Role::Sender) => Takes::Values,
        _ => Takes::Items,
    }
}

/// What a protocol reveals beyond its output, in plain words, for pages people read (the
/// report page, the browser demo). The "Security" and "What leaks" sections of
/// docs/protocols/*.md remain the reference.
#[derive(Debug, Clone, Copy)]
pub struct Leakage {
    /// The security model, e.g. "semi-honest".
    pub model: &'static str,
    /// What a run reveals beyond its output.
    pub text: &'static str,
    /// The protocol's page in the repository.
    pub doc: &'static str,
}

/// The sentence added to a protocol's leakage when both parties learn the result
/// (`--reveal both`).
pub const REVEAL_BOTH_LEAKS: &str = "Both parties learn the result: the receiver tells the sender, \
    which checks that every claimed row is its own but otherwise trusts the receiver's report \
    (docs/protocols/reveal.md).";
