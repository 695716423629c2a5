//! Cryptographic building blocks, each a thin layer over a kept crate: randomness from
//! the OS ([`rng`]), domain-separated hashing ([`dst`]), the ristretto255 group
//! ([`ristretto`], curve25519-dalek), Elligator 2 on Curve25519 ([`elligator`]), the
//! BLS12-381 pairing ([`bls12_381`], blstrs), a Diffie–Hellman OPRF ([`oprf`]), an AES
//! counter-mode generator ([`prg`]), a wide permutation ([`wideperm`], fixed-key AES) and
//! the adversary model the blocks check their peer against ([`security`]). None does I/O
//! or knows which protocol uses it.

pub mod bls12_381;
pub mod dst;
pub mod elligator;
pub mod oprf;
pub mod prg;
pub mod ristretto;
pub mod rng;
pub mod security;
pub mod wideperm;
