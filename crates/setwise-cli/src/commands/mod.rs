//! One module per subcommand. Each is a leaf: what several share (arguments, input,
//! connecting and serving, reports, outputs, generated data) lives beside this folder.

pub mod authorize;
pub mod bench;
pub mod db;
pub mod demo;
pub mod generate;
pub mod judge;
pub mod params;
pub mod report;
pub mod role;
pub mod stage;
pub mod tls;
pub mod ui;
