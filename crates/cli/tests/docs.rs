//! The docs name only what exists: every link of README.md, CHANGELOG.md and docs/*.md
//! leads to a file of the repository (and to a heading of it, when it names one); every
//! repository path in backticks exists; every `cargo` command names a package of the
//! workspace and a test, example or bench target that package has; every `mqlite`
//! subcommand is one the command knows.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the repository root")
        .to_path_buf()
}

/// README.md, CHANGELOG.md and every page under docs/ (the console's pages too).
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The text outside fenced code blocks, and the lines inside them.
fn split_code(text: &str) -> (String, Vec<String>) {
    let (mut prose, mut code) = (String::new(), Vec::new());
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            code.push(line.to_owned());
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    (prose, code)
}

/// Every `[text](target)` link target of markdown prose.
fn links(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_owned());
        }
    }
    out
}

/// Every `backticked` span of markdown prose.
fn code_spans(prose: &str) -> Vec<String> {
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// A workspace package: its name, directory and target names by kind.
struct Package {
    name: String,
    dir: PathBuf,
    manifest: String,
}

impl Package {
    /// Whether `kind` (`test`, `example`, `bench`) target `name` exists.
    fn has_target(&self, kind: &str, name: &str) -> bool {
        let declared = self
            .manifest
            .split(&format!("[[{kind}]]"))
            .skip(1)
            .any(|block| {
                block
                    .lines()
                    .take_while(|l| !l.starts_with('['))
                    .any(|l| l.replace(' ', "") == format!("name=\"{name}\""))
            });
        let folder = match kind {
            "test" => "tests",
            "example" => "examples",
            _ => "benches",
        };
        let auto_off = self.manifest.contains(&format!("auto{folder} = false"));
        declared
            || (!auto_off
                && (self.dir.join(folder).join(format!("{name}.rs")).is_file()
                    || self.dir.join(folder).join(name).join("main.rs").is_file()))
    }
}

fn packages(root: &Path) -> Vec<Package> {
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = workspace
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("workspace members");
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| {
            let dir = root.join(m);
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("manifest");
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .expect("a package name")
                .to_owned();
            Package {
                name,
                dir,
                manifest,
            }
        })
        .collect()
}

/// The words of a command line after its leading `VAR=value` assignments.
fn command_words(line: &str) -> Vec<&str> {
    let line = line.split(" # ").next().unwrap_or("");
    line.split_whitespace()
        .skip_while(|w| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
        })
        .collect()
}

/// What is wrong with one `cargo …` command, if anything.
fn check_cargo(words: &[&str], packages: &[Package]) -> Option<String> {
    let value = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    let package = match value("-p") {
        Some(name) => match packages.iter().find(|p| p.name == name) {
            Some(p) => Some(p),
            None => return Some(format!("no package {name}")),
        },
        None => None,
    };
    for (flag, kind) in [
        ("--test", "test"),
        ("--example", "example"),
        ("--bench", "bench"),
    ] {
        let Some(target) = value(flag) else { continue };
        let found = match package {
            Some(p) => p.has_target(kind, target),
            None => packages.iter().any(|p| p.has_target(kind, target)),
        };
        if !found {
            return Some(format!("no {kind} target {target}"));
        }
    }
    None
}

/// The subcommand of an `mqlite …` command line, past the global flags.
fn mqlite_subcommand<'a>(words: &[&'a str]) -> Option<&'a str> {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        match *w {
            "--db" | "--endpoint" | "--token" | "--output" => i += 2,
            w if w.starts_with('-') => i += 1,
            w => return Some(w),
        }
    }
    None
}

#[test]
fn every_link_path_and_command_in_the_docs_exists() {
    let root = root();
    let packages = packages(&root);
    let mut problems = Vec::new();
    let mut subcommands: BTreeSet<(String, String)> = BTreeSet::new();
    for page in pages(&root) {
        let name = page
            .strip_prefix(&root)
            .unwrap_or(&page)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&page).expect("a page");
        let (prose, code) = split_code(&text);
        for link in links(&prose) {
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(path)
            };
            if !target.exists() {
                problems.push(format!("{name}: link to {link}: no such file"));
            } else if !anchor.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&target).expect("page")).contains(anchor)
            {
                problems.push(format!("{name}: link to {link}: no such heading"));
            }
        }
        let spans = code_spans(&prose);
        for span in &spans {
            let path = span.split("::").next().unwrap_or(span);
            let path = path.trim_end_matches([',', '.', ':']);
            let repo_path = [
                "crates/", "docs/", "scripts/", "benches/", "deploy/", ".ci/",
            ]
            .iter()
            .any(|p| path.starts_with(p));
            let placeholder = path.contains(['*', '<', '…', '{', ' ']);
            if repo_path && !placeholder && !root.join(path).exists() {
                problems.push(format!("{name}: `{span}`: no such path"));
            }
        }
        let lines = spans.iter().cloned().chain(code);
        for line in lines {
            let words = command_words(line.trim().trim_start_matches("$ "));
            match words.first() {
                Some(&"cargo") => {
                    if let Some(p) = check_cargo(&words, &packages) {
                        problems.push(format!("{name}: `{line}`: {p}"));
                    }
                }
                Some(&"mqlite") => {
                    if let Some(sub) = mqlite_subcommand(&words)
                        && sub.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    {
                        subcommands.insert((sub.to_owned(), name.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    for (sub, page) in &subcommands {
        let known = Command::new(env!("CARGO_BIN_EXE_mqlite"))
            .args([sub.as_str(), "--help"])
            .output()
            .expect("mqlite runs")
            .status
            .success();
        if !known {
            problems.push(format!("{page}: `mqlite {sub}`: no such subcommand"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug(" Two brokers for availability"),
        "two-brokers-for-availability"
    );
    assert_eq!(
        slug(" `SchemaVersionMismatch`: \"the schema\""),
        "schemaversionmismatch-the-schema"
    );
}
