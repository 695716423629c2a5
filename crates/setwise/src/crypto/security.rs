//! The adversary model a run withstands. It lives among the building blocks because
//! they check their peer accordingly (OT extension, silent VOLE); protocols and the
//! session re-export it.

/// The adversary a job must withstand: both parties ask for the same in the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Security {
    /// Peers follow the protocol but try to learn more from what they see.
    #[default]
    SemiHonest,
    /// A peer may deviate in any way: a run then ends with an error or a correct result,
    /// never one that tells the peer more than its output.
    Malicious,
}

impl Security {
    /// The CLI and hello name.
    pub fn name(self) -> &'static str {
        match self {
            Security::SemiHonest => "semi-honest",
            Security::Malicious => "malicious",
        }
    }
}
