//! Parquet and Arrow IPC files in a build without the `columnar` feature: every use is
//! an error that says so (the CLI turns the feature on; see `columnar/`).

use super::format::Format;
use super::rows::Span;
use crate::error::InputError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a columnar file's bytes are.
#[derive(Debug, Clone)]
#[allow(dead_code, reason = "kept as the feature's reader keeps them, so that callers build either way")]
pub(super) enum Source {
    /// A file.
    File(PathBuf),
    /// Bytes in memory.
    Memory(Vec<u8>),
}

impl Source {
    /// Bytes in memory.
    pub fn memory(data: Vec<u8>) -> Self {
        Self::Memory(data)
    }
}

/// An open Parquet or Arrow input: never built without the feature.
#[derive(Debug, Clone)]
pub(super) enum Table {}

fn off(what: &str) -> InputError {
    InputError::Invalid(format!(
        "{what}: this build of setwise reads and writes no Parquet or Arrow files (feature `columnar`)"
    ))
}

impl Table {
    pub fn open(_: Source, _: Format, path: &Path) -> Result<Self, InputError> {
        Err(off(&path.display().to_string()))
    }

    pub fn read_keys(&mut self, _: &[String], _: &mut Vec<u8>) -> Result<Vec<Span>, InputError> {
        match *self {}
    }

    pub fn check_csv(&self) -> Result<(), InputError> {
        match *self {}
    }

    pub fn key_names(&self) -> &[String] {
        match *self {}
    }

    pub fn each_text(&self, _: &str, _: impl FnMut(usize, &str) -> Result<(), InputError>) -> Result<(), InputError> {
        match *self {}
    }

    pub fn write_rows<'a>(
        &self,
        _: &dyn Fn(usize) -> Option<&'a [String]>,
        _: &[String],
        _: Format,
        _: impl Write + Send,
    ) -> Result<usize, InputError> {
        match *self {}
    }
}

/// Rows of a CSV or text input in a columnar format: refused.
pub(super) struct SplitRows<W> {
    never: Table,
    _out: std::marker::PhantomData<W>,
}

impl<W: Write + Send> SplitRows<W> {
    pub fn new(_: &[String], _: &[String], _: Format, _: W) -> Result<Self, InputError> {
        Err(off("the output"))
    }

    pub fn push(&mut self, _: &[std::borrow::Cow<'_, [u8]>], _: &[String]) -> Result<(), InputError> {
        match self.never {}
    }

    pub fn finish(self) -> Result<usize, InputError> {
        match self.never {}
    }
}
