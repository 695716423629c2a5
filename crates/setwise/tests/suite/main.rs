//! The library's integration tests, one binary with a module per subject: one link and
//! one compilation of the generic protocol code instead of sixteen (the build of the
//! separate binaries was most of CI's time).

mod common;

mod authorized;
mod auto;
mod compact;
mod conformance;
mod ecdh;
mod fhe;
mod hostile;
mod message_tags;
mod mqrpmt;
mod mqrpmt_ops;
mod ot;
mod reveal;
mod unbalanced;
mod unbalanced_build;
mod unbalanced_noise;
mod unbalanced_storage;
mod vole;
mod vole_psi;
