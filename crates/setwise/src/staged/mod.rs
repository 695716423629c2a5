//! Staged runs: a protocol split into stages that exchange their messages through shared
//! storage instead of a connection, bucket by bucket, resumable and idempotent. For sets
//! that live in a cluster (Spark, through the Python package) or for long runs from the
//! CLI (`setwise stage`). docs/scale-out.md says how two organisations set one up and
//! what it leaks beyond the protocol (each bucket's size).
//!
//! Layers: this module sits beside [`session`](crate::session) (it uses its hello) and
//! above [`protocols`](crate::protocols); nothing below imports it.
//!
//! - [`plan`]: the settings each party announces in its hello, and the [`Plan`] both
//!   settle from the two hellos (session id, B, bucket key);
//! - [`bucket`]: items into the agreed buckets;
//! - [`seed`]: the per-run seed every secret and order is derived from;
//! - [`ecdh`]: the per-bucket steps of DH-PSI, pure functions on values;
//! - [`replay`]: any other protocol's role, replayed stage by stage from the run seed
//!   over the messages in the exchange (`rounds`: its stages in the runner);
//! - [`message`]: a bucket's message as bytes (the protocol's stream frames);
//! - [`location`]: where the exchange is (a directory or an S3 prefix), and its
//!   bounded reads and write-once creates;
//! - [`store`]: the exchange's and workdir's files, markers, journal;
//! - [`auth`]: the operators' exchange key and the MACs on markers and abort notes;
//! - [`work`]: a bucket's round apart from the runner: in its process, or in a
//!   cluster's executors meeting it through the workdir (the Spark driver);
//! - [`runner`]: the stages over a directory exchange (the CLI's `setwise stage`, and
//!   the Spark driver with the buckets in its executors).
//!
//! ```
//! use setwise::staged::{Plan, RunSeed, Settings, bucket, ecdh};
//! use setwise::{Operation, Protocol, Role};
//!
//! let settings = Settings::new("run-42", Protocol::Ecdh, Operation::Intersection);
//! let (x, y) = (["a", "b", "c"], ["c", "d"]);
//! let (s_seed, r_seed) = (RunSeed::generate(), RunSeed::generate());
//! // Stage 0: each party publishes its hello; each settles the plan from both.
//! let (hs, hr) = (settings.hello(Role::Sender, x.len(), &s_seed), settings.hello(Role::Receiver, y.len(), &r_seed));
//! let sp = Plan::agree(&settings, &hs, &hr).unwrap();
//! let rp = Plan::agree(&settings, &hr, &hs).unwrap();
//! assert_eq!(sp.buckets, 1);
//! let (bx, by) = (bucket::assign(&sp, &x), bucket::assign(&rp, &y));
//! // Stage 1 (both), stage 2 (sender), stage 3 (receiver), bucket 0 of 1.
//! let request = ecdh::receiver_blind(&r_seed, &rp, &bucket::select(&y, &by[0])).unwrap();
//! let sender = ecdh::sender_blind(&s_seed, &sp, 0, &bucket::select(&x, &bx[0])).unwrap();
//! let reblinded = ecdh::sender_reblind(&s_seed, &sp, 0, &request).unwrap();
//! let set = ecdh::sender_set(ecdh::receiver_reblind(&r_seed, &rp, &sender).unwrap()).unwrap();
//! let hits: Vec<usize> = ecdh::matches(&set, &reblinded).into_iter().map(|p| by[0][p] as usize).collect();
//! assert_eq!(hits, vec![0]); // y[0] = "c"
//! ```

pub mod auth;
pub mod bucket;
pub mod ecdh;
pub mod location;
pub mod message;
pub mod plan;
pub mod replay;
mod rounds;
pub mod runner;
pub mod seed;
mod stages;
pub mod store;
pub mod work;

pub use auth::ExchangeKey;
pub use location::Location;
pub use plan::{BucketKey, Buckets, Plan, Settings, choose_buckets};
pub use runner::{Remote, Runner, Step};
pub use seed::RunSeed;
