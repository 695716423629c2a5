//! A party's flags in a file: `--config party.toml` (or `SETWISE_CONFIG`).
//!
//! The file's keys are the long flags of the commands, without the dashes. Keys at the
//! top apply to every command that has the flag; a table named for a command (`[sender]`,
//! `[receiver]`, `[db.build]`, `[stage.run]`) applies to that command and overrides the
//! keys above it. Flags on the command line, then the environment variables a flag reads
//! (`SETWISE_TLS_CERT`, …), override the file. A key no command under its
//! table has, a table that names no command, or a value of the wrong shape is an error
//! naming the key and the file, before anything runs.
//!
//! Values: a string, number or boolean for a flag taking one value; an array for a flag
//! taking several (`key = ["email", "phone"]`); `true` or `false` for a switch. Paths are
//! taken as on the command line, from the directory setwise runs in.
//!
//! The file becomes command-line arguments placed before the user's, so clap checks
//! every value as it checks a flag.

use crate::Failure;
use clap::{ArgAction, Command};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The environment variable naming a configuration file when `--config` is not given.
pub const ENV: &str = "SETWISE_CONFIG";

/// The largest configuration file read (a party's flags take a few hundred bytes).
const MAX_BYTES: u64 = 1 << 20;

/// `argv` with the flags of the configuration file it names (by `--config` or
/// [`ENV`]) inserted after the command's name, and that file; `argv` itself without one.
pub fn merged(cli: Command, argv: Vec<OsString>) -> Result<(Vec<OsString>, Option<PathBuf>), Failure> {
    let Some(path) = config_path(&argv) else {
        return Ok((argv, None));
    };
    let mut cli = cli;
    cli.build(); // global flags reach the subcommands
    let table = read(&path)?;
    let (path_names, at) = command_path(&cli, &argv);
    check(&cli, &table, &path, "")?;
    // The keys that apply, from the top down to the command run (later ones win).
    let mut keys: Vec<(String, toml::Value)> = Vec::new();
    let mut cmd = &cli;
    let (mut tables, mut table_here) = (vec![&table], Some(&table));
    for name in &path_names {
        cmd = cmd.find_subcommand(name).expect("found by command_path");
        // The command's own table, if the file has one (`[db.build]` without `[db]`
        // keys, or no table at all, still gives the top-level keys).
        table_here = table_here.and_then(|t| t.get(name.as_str())).and_then(toml::Value::as_table);
        tables.extend(table_here);
    }
    for t in tables {
        for (k, v) in t {
            if !v.is_table() {
                keys.retain(|(old, _)| old != k);
                keys.push((k.clone(), v.clone()));
            }
        }
    }
    // What the user typed, global flags before the command included.
    let typed = &argv[1..];
    let gave = |a: &clap::Arg| {
        a.get_long().is_some_and(|long| user_gave(typed, long, a.get_short()))
            || a.get_env().is_some_and(|v| std::env::var_os(v).is_some())
    };
    let mut inserted = Vec::new();
    for (key, value) in keys {
        let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(key.as_str())) else {
            continue; // a key for other commands under this table
        };
        // Flags given, then their environment variables (SETWISE_TLS_*), beat the file,
        // and so does a flag given that excludes this one (`-q` against `verbose`).
        if gave(arg) || cmd.get_arg_conflicts_with(arg).into_iter().any(gave) {
            continue;
        }
        inserted.extend(tokens(&path, &key, arg.get_action(), &value)?);
    }
    let mut out = argv[..at].to_vec();
    out.extend(inserted);
    out.extend_from_slice(&argv[at..]);
    Ok((out, Some(path)))
}

/// The file named by `--config FILE`, `--config=FILE` or [`ENV`].
fn config_path(argv: &[OsString]) -> Option<PathBuf> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = a.as_bytes().strip_prefix(b"--config=") {
            return Some(PathBuf::from(OsStr::from_bytes(v)));
        }
    }
    std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn read(path: &Path) -> Result<toml::Table, Failure> {
    let fail = |what: String| Failure::usage(anyhow::anyhow!("configuration file {}: {what}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut text = String::new();
    use std::io::Read;
    file.take(MAX_BYTES + 1).read_to_string(&mut text).map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_BYTES {
        return Err(fail(format!("larger than {} KiB", MAX_BYTES >> 10)));
    }
    text.parse::<toml::Table>().map_err(|e| fail(e.to_string().trim_end().replace('\n', " ")))
}

/// The subcommand names in `argv` (`["db", "build"]`) and the index just after the last.
fn command_path(cli: &Command, argv: &[OsString]) -> (Vec<String>, usize) {
    let (mut names, mut at, mut cmd) = (Vec::new(), 1, cli);
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].to_string_lossy();
        if a == "--" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            // A global flag before the command; skip its value when it takes one.
            let takes_value = !long.contains('=')
                && cmd.get_arguments().any(|x| x.get_long() == Some(long) && x.get_action().takes_values());
            i += 1 + usize::from(takes_value);
            continue;
        }
        match cmd.find_subcommand(a.as_ref()) {
            Some(sub) if !a.starts_with('-') => {
                names.push(sub.get_name().to_string());
                cmd = sub;
                i += 1;
                at = i;
            }
            _ => break,
        }
    }
    (names, at)
}

/// Every key and table of `table`, read at command `cmd` (`under` names it for errors):
/// a table must name a subcommand, a key a flag of `cmd` or of a command under it.
fn check(cmd: &Command, table: &toml::Table, file: &Path, under: &str) -> Result<(), Failure> {
    let fail = |what: String| Failure::usage(anyhow::anyhow!("configuration file {}: {what}", file.display()));
    let here = if under.is_empty() { "at the top".to_string() } else { format!("in [{under}]") };
    for (key, value) in table {
        if let toml::Value::Table(inner) = value {
            let sub = cmd.find_subcommand(key).ok_or_else(|| {
                fail(format!("unknown table [{}]: `{}` has no command `{key}`", join(under, key), named(under)))
            })?;
            check(sub, inner, file, &join(under, key))?;
        } else if key == "config" {
            return Err(fail(format!("`config` {here}: a configuration file cannot name another")));
        } else if !has_flag(cmd, key) {
            return Err(fail(format!("unknown key `{key}` {here}: no command under `{}` has --{key}", named(under))));
        }
    }
    Ok(())
}

fn join(under: &str, key: &str) -> String {
    if under.is_empty() { key.to_string() } else { format!("{under}.{key}") }
}

/// The command a table stands for, as typed: `setwise db build`.
fn named(under: &str) -> String {
    if under.is_empty() { "setwise".into() } else { format!("setwise {}", under.replace('.', " ")) }
}

/// Whether `cmd` or a command under it has the long flag `--key` (not help or version).
fn has_flag(cmd: &Command, key: &str) -> bool {
    let own = cmd
        .get_arguments()
        .any(|a| a.get_long() == Some(key) && !matches!(a.get_action(), ArgAction::Help | ArgAction::Version));
    own || cmd.get_subcommands().any(|s| has_flag(s, key))
}

/// Whether the user's arguments give `--key` (or its short form) themselves.
fn user_gave(given: &[OsString], key: &str, short: Option<char>) -> bool {
    let long = format!("--{key}");
    let long_eq = format!("--{key}=");
    given.iter().take_while(|a| *a != "--").map(|a| a.to_string_lossy()).any(|a| {
        a == long
            || a.starts_with(&long_eq)
            || short.is_some_and(|c| a.starts_with('-') && !a.starts_with("--") && a[1..].starts_with(c))
    })
}

/// The arguments for `--key = value` given how the flag acts.
fn tokens(file: &Path, key: &str, action: &ArgAction, value: &toml::Value) -> Result<Vec<OsString>, Failure> {
    let fail = |what: &str| Failure::usage(anyhow::anyhow!("configuration file {}: `{key}` {what}", file.display()));
    let flag = || OsString::from(format!("--{key}"));
    let with = |v: &toml::Value| -> Result<OsString, Failure> {
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => return Err(fail("takes a string, number or boolean")),
        };
        let mut t = OsString::from(format!("--{key}="));
        t.push(OsStr::new(&text));
        Ok(t)
    };
    match action {
        ArgAction::SetTrue | ArgAction::SetFalse => match value {
            toml::Value::Boolean(b) => {
                Ok(if *b == matches!(action, ArgAction::SetTrue) { vec![flag()] } else { vec![] })
            }
            _ => Err(fail("is a switch: write true or false")),
        },
        ArgAction::Count => match value {
            toml::Value::Integer(n) if (0..=16).contains(n) => Ok(vec![flag(); *n as usize]),
            _ => Err(fail("counts: write a number from 0 to 16")),
        },
        ArgAction::Append => match value {
            toml::Value::Array(items) => items.iter().map(with).collect(),
            v => Ok(vec![with(v)?]),
        },
        _ => match value {
            toml::Value::Array(_) => Err(fail("takes one value, not a list")),
            v => Ok(vec![with(v)?]),
        },
    }
}
