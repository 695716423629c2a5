//! Finite fields and polynomials over them: word-sized primes ([`zp`], the BFV plaintext
//! moduli) and GF(2^128 − 159) ([`fp128`], compact PSI), both [`PrimeField`]s, so one
//! polynomial module ([`poly`]) serves both; O(n log² n) interpolation and evaluation
//! over GF(2^128 − 159) ([`fastpoly`], on the transforms of [`ntt`]); and the binary
//! field GF(2^128) ([`gf128`], VOLE and OKVS).

pub mod fastpoly;
pub mod field;
pub mod fp128;
pub mod gf128;
pub mod ntt;
pub mod poly;
pub mod zp;

pub use field::PrimeField;
